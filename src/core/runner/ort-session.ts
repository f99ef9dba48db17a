/**
 * Creates the ONNX Runtime session for a converted decoder and describes which
 * optional inputs it accepts.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { InferenceSession } from "onnxruntime-node";

export type ModelFormat = "q4" | "fp32";

export interface SessionThreads {
  intraOpThreads?: number;
  interOpThreads?: number;
}

/**
 * Default intra-op threads. Measured on the 2 vCPU dev box with bench/decode.ts:
 * see bench/README.md for the numbers behind this choice.
 */
export const DEFAULT_INTRA_OP_THREADS = 2;

export function modelFile(modelDir: string, format: ModelFormat): string {
  return join(modelDir, "onnx", format === "q4" ? "model_q4.onnx" : "model.onnx");
}

export async function createDecoderSession(
  modelDir: string,
  format: ModelFormat,
  threads: SessionThreads = {},
): Promise<InferenceSession> {
  const path = modelFile(modelDir, format);
  if (!existsSync(path)) throw new Error(`model file not found: ${path}`);
  // The path form lets ORT resolve the `<file>_data` external weights next to the model.
  return InferenceSession.create(path, {
    executionProviders: ["cpu"],
    graphOptimizationLevel: "all",
    executionMode: "sequential",
    intraOpNumThreads: threads.intraOpThreads ?? DEFAULT_INTRA_OP_THREADS,
    interOpNumThreads: threads.interOpThreads ?? 1,
  });
}
