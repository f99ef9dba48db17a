/**
 * The start-time check of a model directory's files for the format it will be served in:
 * config.json and generation_config.json read as the engine reads them, tokenizer.json present and
 * valid JSON, and the ONNX file's structure and external data sizes (`onnx-check.ts`). A directory
 * that fails is listed as unavailable with the reason, so a half-written copy is reported when the
 * server starts and the other models still serve.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { readModelConfig } from "../../core/model/model-config.ts";
import { type ModelFormat, weightPath } from "../../core/model/model-files.ts";
import { onnxFileProblem } from "./onnx-check.ts";

function tokenizerProblem(dir: string): string | undefined {
  const path = join(dir, "tokenizer.json");
  try {
    const json: unknown = JSON.parse(readFileSync(path, "utf8"));
    if (typeof json !== "object" || json === null || Array.isArray(json))
      return `${path} is not a JSON object`;
    return undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return `${path} is missing`;
    return `${path}: ${(err as Error).message}`;
  }
}

/** What keeps `dir` from loading as `format`, or undefined when its files hold together. */
export function modelFilesProblem(dir: string, format: ModelFormat): string | undefined {
  try {
    readModelConfig(dir);
  } catch (err) {
    return `invalid model config: ${(err as Error).message}`;
  }
  return tokenizerProblem(dir) ?? onnxFileProblem(weightPath(dir, format));
}
