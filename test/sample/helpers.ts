/** Shared builders for the sampler tests: parameters, rows and a reference softmax. */
import { NEUTRAL_SAMPLING, type SamplingParams } from "../../src/core/sample/params.ts";

export function params(overrides: Partial<SamplingParams> = {}): SamplingParams {
  return { ...NEUTRAL_SAMPLING, seed: 7, ...overrides };
}

export const greedy = (overrides: Partial<SamplingParams> = {}) => params({ temperature: 0, ...overrides });

export function row(values: readonly number[]): Float32Array {
  return Float32Array.from(values);
}

/** Deterministic pseudo-random logits (normal, given spread); independent of the code under test. */
export function randomRow(length: number, seed: number, spread = 3): Float32Array {
  let state = seed >>> 0 || 1;
  const uniform = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return ((state >>> 0) + 0.5) / 4294967296;
  };
  const out = new Float32Array(length);
  for (let i = 0; i < length; i++) {
    out[i] = spread * Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
  }
  return out;
}

/** float64 log_softmax with Math.exp, the reference for logprobs. */
export function logSoftmax(values: ArrayLike<number>): number[] {
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < values.length; i++) max = Math.max(max, values[i]);
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += Math.exp(values[i] - max);
  const lse = max + Math.log(sum);
  return Array.from(values, (v) => v - lse);
}

/** How often each id occurs. */
export function tokenCounts(ids: readonly number[], vocab: number): number[] {
  const counts = new Array<number>(vocab).fill(0);
  for (const id of ids) counts[id]++;
  return counts;
}
