/**
 * The converted model directory's weight files, named once: every layer that opens, lists or
 * writes an ONNX flavour asks here.
 */
import { join } from "node:path";

/** Converted ONNX flavours: q4 → onnx/model_q4.onnx, fp32 → onnx/model.onnx (transformers.js names). */
export type ModelFormat = "q4" | "fp32";
export const MODEL_FORMATS: readonly ModelFormat[] = ["q4", "fp32"];

const ONNX_FILE_NAMES: Record<ModelFormat, string> = { q4: "model_q4.onnx", fp32: "model.onnx" };

/** The ONNX file name under onnx/ for a format. */
export function onnxFileName(format: ModelFormat): string {
  return ONNX_FILE_NAMES[format];
}

/** The weight file's path relative to the model directory ("onnx/model_q4.onnx"). */
export function weightFile(format: ModelFormat): string {
  return `onnx/${ONNX_FILE_NAMES[format]}`;
}

/** The weight file's path inside `modelDir`. */
export function weightPath(modelDir: string, format: ModelFormat): string {
  return join(modelDir, "onnx", ONNX_FILE_NAMES[format]);
}
