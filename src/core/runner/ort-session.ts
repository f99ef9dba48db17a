/**
 * Creates the ONNX Runtime session for a converted decoder and describes which
 * optional inputs it accepts.
 */
import { existsSync } from "node:fs";
import { InferenceSession } from "onnxruntime-node";
import { type ModelFormat, weightPath } from "../model/model-files.ts";
import { type RuntimeFlags, runtimeFlags } from "../runtime-flags.ts";
import type { KvCacheDtypeSetting } from "../types.ts";
import type { DecoderSession } from "./decoder-session.ts";
import type { KvDtype } from "./kv-rows.ts";
import { kvDtypeOf } from "./kv-slots.ts";
import { nativeSessions } from "./native-session.ts";
import { OrtDecoderSession } from "./ort-decoder-session.ts";

export interface DecoderSessionOptions {
  intraOpThreads?: number;
  interOpThreads?: number;
  /**
   * Native session only: every run writes its logits into one buffer kept by the session, so a
   * result is valid until the next run (the engine consumes them within its step). Saves a
   * rows × vocabulary allocation, and its garbage, per step.
   */
  reuseLogits?: boolean;
  /** The KV cache's element type (default "auto": kvCacheDtypeFor's choice for the format). */
  kvCacheDtype?: KvCacheDtypeSetting;
}

/**
 * Default intra-op threads. On the 2 vCPU dev box (bench/README.md) a second
 * thread speeds up q4 decode by ~20% and prefill by ~75% when the machine is
 * otherwise idle; with other load on the box 1 thread degrades far less.
 */
export const DEFAULT_INTRA_OP_THREADS = 2;

/**
 * What a decoder session was actually built with, read from the session itself: the runner, the
 * KV cache, the engine and /metrics take these facts from here, never from the switches that
 * asked for them (a graph rewrite may fall back).
 */
export interface BuiltSession {
  session: DecoderSession;
  /** ortserve's CachedAttention (the rewritten graph) or ONNX Runtime's GroupQueryAttention. */
  attention: "ortserve" | "onnxruntime";
  /** The KV cache's element type, as the session's inputs declare it. */
  kvCacheDtype: KvDtype;
  /** The session takes ragged tokens (`token_rows`): any tokens per row in one pass. */
  ragged: boolean;
  /** What multiplies the weights: ortserve's kernel, or ONNX Runtime's MatMulNBits (q4) / MatMul. */
  projections: "ortserve.BlockQuantMatMul" | "MatMulNBits" | "MatMul";
  /** With ortserve's kernel, the instruction set it runs on ("avx512-vnni", "avx2"). */
  projectionKernel?: string;
  /** With BlockQuantMatMul: the bytes its packed weights take, which every decode step reads. */
  packedWeightBytes?: number;
  /** The session binds the cache in place (native): the cache may reserve its whole budget at once. */
  bindsCacheInPlace: boolean;
}

/**
 * The decoder's session: the native one (native-session.ts: the same ONNX Runtime through its C
 * API with IoBinding, no copies of the KV cache) when the addon is built, onnxruntime-node's
 * otherwise or with ORTSERVE_NATIVE_SESSION=0 (`flags.nativeSession`). Both run with the same
 * options and give the same numbers. Returns the session and what it was built with.
 */
export async function createDecoderSession(
  modelDir: string,
  format: ModelFormat,
  options: DecoderSessionOptions = {},
  flags: RuntimeFlags = runtimeFlags,
): Promise<BuiltSession> {
  const path = weightPath(modelDir, format);
  if (!existsSync(path)) throw new Error(`model file not found: ${path}`);
  const intraOpNumThreads = options.intraOpThreads ?? DEFAULT_INTRA_OP_THREADS;
  const interOpNumThreads = options.interOpThreads ?? 1;
  const kvCacheDtype = kvCacheDtypeFor(format, options.kvCacheDtype, flags);
  if (nativeSessions && flags.nativeSession) {
    const session = nativeSessions.create(path, {
      intraOpThreads: intraOpNumThreads,
      interOpThreads: interOpNumThreads,
      reuseLogits: options.reuseLogits,
      kvCacheDtype,
      cachedAttention: flags.cachedAttention,
    });
    const packed = session.packedWeightBytes > 0;
    return {
      session,
      attention: session.attention,
      kvCacheDtype: kvDtypeOf(session),
      ragged: session.ragged,
      projections: format !== "q4" ? "MatMul" : packed ? "ortserve.BlockQuantMatMul" : "MatMulNBits",
      ...(packed
        ? {
            projectionKernel: nativeSessions.blockQuantMatMulKernel(),
            packedWeightBytes: session.packedWeightBytes,
          }
        : {}),
      bindsCacheInPlace: true,
    };
  }
  // onnxruntime-node's session runs ONNX Runtime's GroupQueryAttention, over a float32 cache only.
  if (options.kvCacheDtype && options.kvCacheDtype !== "auto" && kvCacheDtype !== "float32")
    throw new Error(
      `a ${kvCacheDtype} KV cache needs ortserve's native session (native/ built, ORTSERVE_NATIVE_SESSION not 0)`,
    );
  // The path form lets ORT resolve the `<file>_data` external weights next to the model.
  const ort = await InferenceSession.create(path, {
    executionProviders: ["cpu"],
    graphOptimizationLevel: "all",
    executionMode: "sequential",
    intraOpNumThreads,
    interOpNumThreads,
    // As the native session (native/src/session.cc): the intra-op threads stop spinning when a
    // run returns, so the engine's work between steps does not share the cores with them.
    extra: { session: { force_spinning_stop: "1" } },
  });
  const session = new OrtDecoderSession(ort);
  return {
    session,
    attention: "onnxruntime",
    kvCacheDtype: kvDtypeOf(session),
    ragged: false,
    projections: format === "q4" ? "MatMulNBits" : "MatMul",
    bindsCacheInPlace: false,
  };
}

/**
 * The KV cache's element type for a weight format: the one asked for (`--kv-cache-dtype`), else
 * float16 for q4 (as llama.cpp keeps its cache by default: half the bytes each decode step reads
 * per cached position) and float32 for fp32, whose point is exactness.
 * ORTSERVE_KV_CACHE_DTYPE=float32|float16|int8 (`flags.kvCacheDtype`) stands in for "auto"
 * (native session only).
 */
export function kvCacheDtypeFor(
  format: ModelFormat,
  setting: KvCacheDtypeSetting = "auto",
  flags: RuntimeFlags = runtimeFlags,
): KvDtype {
  if (setting !== "auto") return setting;
  if (flags.kvCacheDtype) return flags.kvCacheDtype;
  return format === "q4" ? "float16" : "float32";
}

/** Names of the decoder-with-past cache inputs and outputs (Optimum / transformers.js contract). */
export function pastName(layer: number, kind: "key" | "value"): string {
  return `past_key_values.${layer}.${kind}`;
}

export function presentName(layer: number, kind: "key" | "value"): string {
  return `present.${layer}.${kind}`;
}

/**
 * Throws unless the session follows the contract the batch runner feeds: input_ids,
 * attention_mask, position_ids, num_logits_to_keep and a past per layer in (float32, or the native
 * session's float16 or int8); logits and a
 * present per layer out.
 */
export function checkDecoderContract(session: DecoderSession, numLayers: number): void {
  const inputs = new Set(session.inputNames);
  const outputs = new Set(session.outputNames);
  const layers = Array.from({ length: numLayers }, (_, l) => l);
  const kinds = ["key", "value"] as const;
  const wantIn = [
    "input_ids",
    "attention_mask",
    "position_ids",
    "num_logits_to_keep",
    ...layers.flatMap((l) => kinds.map((k) => pastName(l, k))),
  ];
  const wantOut = ["logits", ...layers.flatMap((l) => kinds.map((k) => presentName(l, k)))];
  const missingIn = wantIn.filter((n) => !inputs.has(n));
  const missingOut = wantOut.filter((n) => !outputs.has(n));
  if (missingIn.length || missingOut.length)
    throw new Error(
      `model does not follow the decoder-with-past contract; missing inputs [${missingIn.join(", ")}]` +
        ` outputs [${missingOut.join(", ")}]`,
    );
  const past = session.inputType(pastName(0, "key"));
  if (past !== undefined && past !== "float32" && past !== "float16" && past !== "int8")
    throw new Error(`KV cache must be float32, float16 or int8, got ${past}`);
}
