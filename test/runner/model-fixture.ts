/**
 * Locates the converted default model for the runner suites; they skip when
 * `npm run setup-model` has not produced it.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type ModelFormat, weightPath } from "../../src/core/model/model-files.ts";
import { modelsDir } from "../../src/util/paths.ts";

export const MODEL_ID = "smollm2-135m-instruct";
export const MODEL_DIR = join(modelsDir(), MODEL_ID);

export function hasModel(format: ModelFormat): boolean {
  return existsSync(join(MODEL_DIR, "config.json")) && existsSync(weightPath(MODEL_DIR, format));
}

/**
 * `npm test` sets up only the default (q4) format. Once that exists the GGUF is
 * cached, and setup converts another format in seconds, or does nothing when
 * its stamp shows the files are current.
 */
export async function ensureModel(format: ModelFormat): Promise<void> {
  const { runSetup } = await import("../../src/cli/commands/setup.ts");
  await runSetup({ format, log: () => {} });
}

/** Largest absolute difference between two equally long arrays. */
export function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} != ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}
