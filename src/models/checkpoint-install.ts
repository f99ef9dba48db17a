/**
 * A model's checkpoints on disk, added one at a time: a GGUF converted as a further checkpoint
 * (`addCheckpoint`), or any build (`installCheckpoint`: `ortserve checkpoint import`'s
 * safetensors) made in a hidden directory and renamed into place with its checkpoint.json, so a
 * running scan never sees half of one.
 */
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { modelsDir } from "../util/paths.ts";
import { ProgressBar, type ProgressStream } from "../util/progress.ts";
import { UsageError } from "../util/usage-error.ts";
import { type Converter, convertAndStamp, loadConverter } from "./convert/run-conversion.ts";
import { sha256File } from "./fetch/digest.ts";
import type { ModelFormat } from "./fetch/model-meta.ts";
import {
  CHECKPOINT_META_FILE,
  CHECKPOINTS_DIR,
  type CheckpointMeta,
  parseCheckpointMeta,
} from "./registry/checkpoint-dir.ts";
import { type Checkpoint, ModelRegistry, type ServedModel } from "./registry.ts";

export interface AddCheckpointOptions {
  modelId: string;
  ggufPath: string;
  step: number;
  metrics?: Record<string, number>;
  format?: ModelFormat;
  modelsDir?: string;
  converter?: Converter;
  progressStream?: ProgressStream;
}

export function servedModel(registry: ModelRegistry, id: string): ServedModel {
  const model = registry.get(id);
  if (model) return model;
  const down = registry.unavailable.find((u) => u.id === id);
  if (down) throw new UsageError(`model "${id}" cannot be served (${down.dir}): ${down.reason}`);
  throw new UsageError(`no model "${id}" in ${registry.modelsDir}`);
}

/** Steps named by any checkpoint.json on disk, valid or not, so a skipped one is not shadowed. */
function stepsOnDisk(modelDir: string): Set<unknown> {
  const steps = new Set<unknown>();
  const root = join(modelDir, CHECKPOINTS_DIR);
  if (!existsSync(root)) return steps;
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    try {
      steps.add(JSON.parse(readFileSync(join(root, entry.name, CHECKPOINT_META_FILE), "utf8")).step);
    } catch {
      // Unreadable metadata names no step.
    }
  }
  return steps;
}

export async function addCheckpoint(opts: AddCheckpointOptions): Promise<Checkpoint> {
  if (!Number.isSafeInteger(opts.step) || opts.step < 0)
    throw new UsageError(`step must be an integer >= 0 (got ${opts.step})`);
  const registry = ModelRegistry.load(modelsDir(opts.modelsDir));
  const model = servedModel(registry, opts.modelId);
  if (hasCheckpoint(model, opts.step))
    throw new UsageError(`model "${model.id}" already has a checkpoint for step ${opts.step}`);
  const ggufPath = resolve(opts.ggufPath);
  if (!(await stat(ggufPath).catch(() => undefined))?.isFile())
    throw new UsageError(`not a file: ${opts.ggufPath}`);

  const format = opts.format ?? model.format;
  const dir = await installCheckpoint(model, opts.step, opts.metrics ?? {}, async (tempDir) => {
    const converter = opts.converter ?? (await loadConverter());
    // The conversion stamp records the source by content, as `convert` does.
    const size = (await stat(ggufPath)).size;
    const bar = new ProgressBar({
      title: "Hashing GGUF",
      total: size,
      unit: "bytes",
      stream: opts.progressStream,
    });
    const ggufSha256 = await sha256File(ggufPath, (n) => bar.update(n));
    bar.done();
    await convertAndStamp({
      ggufPath,
      ggufSha256,
      modelDir: tempDir,
      format,
      converter,
      progressStream: opts.progressStream,
    });
  });
  return readCheckpointOf(dir, format);
}

/**
 * Builds a checkpoint in a hidden directory (`build` writes its model files), adds its
 * checkpoint.json (a new UUID, the step, the metrics) and renames it into place as `step-<n>/`, so
 * a scan never sees half of one; on failure nothing is left.
 */
export async function installCheckpoint(
  model: ServedModel,
  step: number,
  metrics: Record<string, number>,
  build: (tempDir: string) => Promise<void>,
): Promise<string> {
  const finalDir = join(model.dir, CHECKPOINTS_DIR, `step-${step}`);
  const tempDir = join(model.dir, CHECKPOINTS_DIR, `.step-${step}.partial-${process.pid}`);
  await rm(tempDir, { recursive: true, force: true });
  await mkdir(tempDir, { recursive: true });
  try {
    await build(tempDir);
    const meta: Required<CheckpointMeta> = {
      id: randomUUID(),
      step,
      metrics,
      created: Math.floor(Date.now() / 1000),
    };
    await writeFile(join(tempDir, CHECKPOINT_META_FILE), `${JSON.stringify(meta, null, 2)}\n`);
    // Checked again: another add of the same step may have finished meanwhile.
    if (existsSync(finalDir))
      throw new UsageError(`model "${model.id}" already has a checkpoint for step ${step}`);
    await rename(tempDir, finalDir);
    return finalDir;
  } catch (err) {
    await rm(tempDir, { recursive: true, force: true });
    throw err;
  }
}

/** The checkpoint just installed in `dir`, as the registry would list it. */
function readCheckpointOf(dir: string, format: ModelFormat): Checkpoint {
  const meta = parseCheckpointMeta(JSON.parse(readFileSync(join(dir, CHECKPOINT_META_FILE), "utf8")));
  return { id: meta.id, step: meta.step, metrics: meta.metrics, created: meta.created!, dir, format };
}

/** Whether the model has (or had, in a checkpoint.json of any validity) a checkpoint for `step`. */
export function hasCheckpoint(model: ServedModel, step: number): boolean {
  return stepsOnDisk(model.dir).has(step) || existsSync(join(model.dir, CHECKPOINTS_DIR, `step-${step}`));
}
