/**
 * Every ORTSERVE_* switch that changes how the engine computes, parsed in one place when the
 * thread starts. They exist to measure one path against another and to fall back; what a model
 * computes with is then what the session factory built (createDecoderSession's BuiltSession),
 * never these values read again.
 */
import { KV_DTYPES, type KvDtype } from "./runner/kv-rows.ts";

export interface RuntimeFlags {
  /** ORTSERVE_NATIVE_SESSION=0: onnxruntime-node's session instead of ortserve's native one. */
  nativeSession: boolean;
  /** ORTSERVE_CACHED_ATTENTION=0: ONNX Runtime's GroupQueryAttention instead of ortserve's kernel. */
  cachedAttention: boolean;
  /** ORTSERVE_BLOCK_QUANT_MATMUL: "0" keeps MatMulNBits; a kernel's name ("avx2") runs that one. */
  blockQuantMatMul: boolean;
  blockQuantMatMulKernel?: string;
  /** ORTSERVE_KEPT_BINDING=0: the native session binds everything on every run. */
  keptBinding: boolean;
  /** ORTSERVE_NATIVE=0: the sampler's TypeScript kernels instead of the native ones. */
  nativeKernels: boolean;
  /** ORTSERVE_MIXED_STEPS=0: decoding rows and a prompt chunk in two passes even where one would do. */
  mixedSteps: boolean;
  /** ORTSERVE_KV_CACHE_DTYPE=float32|float16|int8: stands in for `--kv-cache-dtype auto`. */
  kvCacheDtype?: KvDtype;
}

export function parseRuntimeFlags(env: Readonly<Record<string, string | undefined>>): RuntimeFlags {
  const dtype = env.ORTSERVE_KV_CACHE_DTYPE;
  if (dtype && !(KV_DTYPES as readonly string[]).includes(dtype))
    throw new Error(
      `ORTSERVE_KV_CACHE_DTYPE must be ${KV_DTYPES.slice(0, -1).join(", ")} or ${KV_DTYPES.at(-1)} (got "${dtype}")`,
    );
  const quant = env.ORTSERVE_BLOCK_QUANT_MATMUL;
  return {
    nativeSession: env.ORTSERVE_NATIVE_SESSION !== "0",
    cachedAttention: env.ORTSERVE_CACHED_ATTENTION !== "0",
    blockQuantMatMul: quant !== "0",
    ...(quant && quant !== "0" && quant !== "1" ? { blockQuantMatMulKernel: quant } : {}),
    keptBinding: env.ORTSERVE_KEPT_BINDING !== "0",
    nativeKernels: env.ORTSERVE_NATIVE !== "0",
    mixedSteps: env.ORTSERVE_MIXED_STEPS !== "0",
    ...(dtype ? { kvCacheDtype: dtype as KvDtype } : {}),
  };
}

/** This thread's switches, as its environment had them when it started. */
export const runtimeFlags: RuntimeFlags = parseRuntimeFlags(process.env);
