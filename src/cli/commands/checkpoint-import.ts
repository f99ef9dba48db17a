/**
 * `ortserve checkpoint import <run dir> --model <id>`: every checkpoint of a training run becomes
 * a checkpoint of a served model — Trainer `checkpoint-<step>/` folders (safetensors, converted
 * by the same decoder-graph converter) and GGUF files named by step — with its step and the
 * metrics trainer_state.json logged for it. Idempotent: steps the model already has are skipped.
 * Each checkpoint is built in a hidden directory and renamed into place (installCheckpoint).
 */
import { resolve } from "node:path";
import {
  addCheckpoint,
  hasCheckpoint,
  installCheckpoint,
  servedModel,
} from "../../models/checkpoint-install.ts";
import type { ModelFormat } from "../../models/fetch/model-meta.ts";
import { discoverCheckpoints, trainerMetrics } from "../../models/import/training-run.ts";
import { ModelRegistry } from "../../models/registry.ts";
import { modelsDir } from "../../util/paths.ts";
import { ProgressBar, type ProgressStream } from "../../util/progress.ts";
import { UsageError } from "../../util/usage-error.ts";

export interface ImportOptions {
  runDir: string;
  modelId: string;
  format?: ModelFormat;
  modelsDir?: string;
  progressStream?: ProgressStream;
  log?: (line: string) => void;
}

export interface ImportResult {
  imported: { step: number; kind: string; metrics: Record<string, number> }[];
  /** Steps the model already had. */
  skipped: number[];
}

export async function importTrainingRun(opts: ImportOptions): Promise<ImportResult> {
  const runDir = resolve(opts.runDir);
  const log = opts.log ?? (() => {});
  const checkpoints = discoverCheckpoints(runDir);
  if (checkpoints.length === 0)
    throw new UsageError(
      `${runDir}: no checkpoint-<step>/ folders with safetensors and no <step>.gguf files`,
    );
  const result: ImportResult = { imported: [], skipped: [] };
  for (const c of checkpoints) {
    // Loaded afresh each time: the model's checkpoints change as this goes.
    const model = servedModel(ModelRegistry.load(modelsDir(opts.modelsDir)), opts.modelId);
    if (hasCheckpoint(model, c.step)) {
      result.skipped.push(c.step);
      log(`step ${c.step}: already imported`);
      continue;
    }
    const metrics = trainerMetrics(runDir, c);
    const format = opts.format ?? model.format;
    if (c.kind === "gguf")
      await addCheckpoint({
        modelId: opts.modelId,
        ggufPath: c.path,
        step: c.step,
        metrics,
        format,
        modelsDir: opts.modelsDir,
        progressStream: opts.progressStream,
      });
    else
      await installCheckpoint(model, c.step, metrics, async (tempDir) => {
        const { convertSafetensors } = await import("../../models/convert/convert-safetensors.ts");
        const bar = new ProgressBar({
          title: `Converting step ${c.step} to ONNX (${format})`,
          unit: "count",
          stream: opts.progressStream,
        });
        try {
          convertSafetensors(c.path, model.dir, tempDir, {
            format,
            onProgress: (done, total, label) => bar.update(done, total, label),
          });
        } catch (err) {
          bar.abort();
          throw err;
        }
        bar.done();
      });
    result.imported.push({ step: c.step, kind: c.kind, metrics });
    log(`step ${c.step}: imported (${c.kind}) ${JSON.stringify(metrics)}`);
  }
  return result;
}
