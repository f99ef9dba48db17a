/**
 * The optional C++ kernels (native/, built by `npm install`) for the
 * sampler's full-vocabulary passes: argmax, max, log-sum-exp, rank, top-n,
 * k-th largest, top_k's heap scan, the candidate and top_p mass passes, and
 * the temperature-only draw. They reproduce the TypeScript kernels in
 * ops/ exactly (logSumExp to the last ulp), so a seeded request draws the
 * same tokens either way; native/README.md has the numbers.
 *
 * The ops call `native` when it is defined and their TypeScript code
 * otherwise. It is undefined when the addon is not built, fails to load, or
 * ORTSERVE_NATIVE=0.
 */
import { createRequire } from "node:module";
import { runtimeFlags } from "../runtime-flags.ts";
import { EXP_TABLE } from "./ops/exp.ts";

export interface NativeKernels {
  /** Whether this CPU has the AVX2 kernels (otherwise the addon runs its portable scalar code). */
  readonly simdAvailable: boolean;
  /** Switches the AVX2 kernels on or off process-wide (tests); returns whether they are in use. */
  setSimd(on: boolean): boolean;
  setExpTable(table: Float64Array): boolean;
  argmax(row: Float32Array, length: number): number;
  maxValue(row: Float32Array, length: number): number;
  logSumExp(row: Float32Array, length: number): number;
  rankOf(row: Float32Array, length: number, tokenId: number): number;
  topN(row: Float32Array, length: number, n: number, outIds: Int32Array, outVals: Float64Array): number;
  /** 1 <= k <= length. */
  kthLargest(row: Float32Array, length: number, k: number): number;
  /** 1 <= k < length; out = [max, k-th largest, 1 when values outside the heap tie with it]. */
  heapTopK(
    row: Float32Array,
    length: number,
    k: number,
    heap: Float64Array,
    ids: Int32Array,
    out: Float64Array,
  ): void;
  /** Returns the count; out[0] = their total weight. */
  collect(
    row: Float32Array,
    length: number,
    threshold: number,
    max: number,
    temperature: number,
    withBuckets: boolean,
    ids: Int32Array,
    weights: Float64Array,
    buckets: Uint16Array,
    out: Float64Array,
  ): number;
  massHistogram(
    row: Float32Array,
    length: number,
    threshold: number,
    max: number,
    temperature: number,
    histogram: Float64Array,
  ): number;
  drawDense(
    row: Float32Array,
    length: number,
    temperature: number,
    u: number,
    blockSums: Float64Array,
  ): number;
}

const ADDON = "../../../native/build/Release/ortserve_native.node";

function load(): NativeKernels | undefined {
  if (!runtimeFlags.nativeKernels) return undefined;
  let kernels: NativeKernels;
  try {
    kernels = createRequire(import.meta.url)(ADDON) as NativeKernels;
  } catch (error) {
    // Not built is the normal fallback; a build that does not load deserves a word.
    if ((error as NodeJS.ErrnoException).code !== "MODULE_NOT_FOUND") {
      process.emitWarning(`ortserve: native kernels failed to load, using the TypeScript ones: ${error}`);
    }
    return undefined;
  }
  if (!kernels.setExpTable(EXP_TABLE)) {
    process.emitWarning("ortserve: native kernels hold a different exp table, using the TypeScript ones");
    return undefined;
  }
  return kernels;
}

/** The loaded addon, whether or not the ops use it. */
export const addon: NativeKernels | undefined = load();

/** What the ops call: the addon, or undefined for the TypeScript kernels. */
export let native: NativeKernels | undefined = addon;

/**
 * Routes the ops through the addon (true) or the TypeScript kernels (false),
 * for tests and benchmarks that compare the two in one process. Returns
 * whether the addon is now in use.
 */
export function useNative(on: boolean): boolean {
  native = on ? addon : undefined;
  return native !== undefined;
}
