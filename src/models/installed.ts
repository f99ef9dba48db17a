/**
 * What a models directory holds, for `ortserve models` and `ortserve rm`: every model directory
 * (servable or not) with its size on disk, architecture, the tensor types of its source and the
 * converted formats present.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { ModelFormat } from "../core/model/model-files.ts";
import { ggufCacheDir } from "../util/paths.ts";
import { stampPath } from "./convert/conversion-stamp.ts";
import { CATALOGUE } from "./fetch/catalogue.ts";
import { MODEL_META_FILE } from "./fetch/model-meta.ts";
import { ggufQuantMix } from "./pull/quant-mix.ts";
import { availableFormats } from "./registry/weights.ts";
import { ModelRegistry } from "./registry.ts";

export interface InstalledModel {
  id: string;
  dir: string;
  bytes: number;
  /** config.json's model_type; undefined when it has none. */
  architecture?: string;
  /** The source's tensor types ("Q4_K 169, Q6_K 29, F32 141"), as recorded at pull time. */
  quantMix?: string;
  formats: ModelFormat[];
  checkpoints: number;
  /** Why it cannot be served; undefined when it can. */
  problem?: string;
}

function readJson(path: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(readFileSync(path, "utf8")) as unknown;
    return typeof v === "object" && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Bytes of every file under dir (symlinks not followed). */
export function directoryBytes(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) total += directoryBytes(path);
    else if (e.isFile()) total += statSync(path).size;
  }
  return total;
}

/**
 * A model converted by `setup` records no quant mix; when its stamp names a catalogue GGUF that is
 * still in the cache, that file's header tells.
 */
function catalogueQuantMix(dir: string): string | undefined {
  const sha = readJson(stampPath(dir))?.gguf_sha256;
  const entry = CATALOGUE.find((e) => e.gguf_sha256 === sha);
  const gguf = entry && join(ggufCacheDir(), entry.gguf_file);
  if (!gguf || statSync(gguf, { throwIfNoEntry: false })?.size !== entry.gguf_size) return undefined;
  try {
    return ggufQuantMix(gguf);
  } catch {
    return undefined;
  }
}

function describe(id: string, dir: string, checkpoints: number, problem?: string): InstalledModel {
  const config = readJson(join(dir, "config.json"));
  const meta = readJson(join(dir, MODEL_META_FILE));
  const model: InstalledModel = {
    id,
    dir,
    bytes: directoryBytes(dir),
    formats: availableFormats(dir),
    checkpoints,
  };
  if (typeof config?.model_type === "string") model.architecture = config.model_type;
  const quantMix = typeof meta?.quant_mix === "string" ? meta.quant_mix : catalogueQuantMix(dir);
  if (quantMix) model.quantMix = quantMix;
  if (problem) model.problem = problem;
  return model;
}

export function listInstalled(modelsDir: string): InstalledModel[] {
  const registry = ModelRegistry.load(modelsDir);
  const models = [
    ...registry.list().map((m) => describe(m.id, m.dir, m.checkpoints.length)),
    ...registry.unavailable.map((u) => describe(u.id, u.dir, 0, u.reason)),
  ];
  return models.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
