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
 * Default intra-op threads. On the 2 vCPU dev box (bench/README.md) a second
 * thread speeds up q4 decode by ~20% and prefill by ~75% when the machine is
 * otherwise idle; with other load on the box 1 thread degrades far less.
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
