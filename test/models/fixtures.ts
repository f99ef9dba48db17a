/** Model directories made of placeholder files: the registry only looks at names and metadata. */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function tempModelsDir(): string {
  return mkdtempSync(join(tmpdir(), "ortserve-models-"));
}

/** A converted-looking model dir; formats [] leaves it unconverted. */
export function writeModel(
  modelsDir: string,
  name: string,
  opts: { formats?: ("q4" | "fp32")[]; meta?: Record<string, unknown>; config?: boolean } = {},
): string {
  const dir = join(modelsDir, name);
  mkdirSync(join(dir, "onnx"), { recursive: true });
  if (opts.meta) writeFileSync(join(dir, "ortserve.json"), JSON.stringify(opts.meta));
  const formats = opts.formats ?? ["q4"];
  if (opts.config ?? formats.length > 0) writeFileSync(join(dir, "config.json"), "{}");
  for (const f of formats) writeFileSync(join(dir, "onnx", f === "q4" ? "model_q4.onnx" : "model.onnx"), "");
  return dir;
}

/** A checkpoint dir with the given checkpoint.json content (raw text when a string). */
export function writeCheckpoint(
  modelDir: string,
  name: string,
  meta: Record<string, unknown> | string,
  formats: ("q4" | "fp32")[] = [],
): string {
  const dir = join(modelDir, "checkpoints", name);
  mkdirSync(join(dir, "onnx"), { recursive: true });
  writeFileSync(join(dir, "checkpoint.json"), typeof meta === "string" ? meta : JSON.stringify(meta));
  if (formats.length > 0) writeFileSync(join(dir, "config.json"), "{}");
  for (const f of formats) writeFileSync(join(dir, "onnx", f === "q4" ? "model_q4.onnx" : "model.onnx"), "");
  return dir;
}
