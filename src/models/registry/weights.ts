/** Which converted weights a model-layout directory holds. */
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { type ModelFormat, weightFile } from "../../core/model/model-files.ts";

export { weightFile };

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Formats whose ONNX file exists in dir, q4 first; empty without config.json (nothing loadable). */
export function availableFormats(dir: string): ModelFormat[] {
  if (!isFile(join(dir, "config.json"))) return [];
  return (["q4", "fp32"] as const).filter((f) => isFile(join(dir, weightFile(f))));
}

/** The preferred format when present, else whatever is there. */
export function pickFormat(
  available: readonly ModelFormat[],
  preferred: ModelFormat,
): ModelFormat | undefined {
  return available.includes(preferred) ? preferred : available[0];
}

export function hasConfig(dir: string): boolean {
  return existsSync(join(dir, "config.json"));
}
