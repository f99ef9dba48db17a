/**
 * exp(x) for x <= 0, over twice as fast as Math.exp in V8: a table of
 * exp(-j/64) times a 4th-degree polynomial for the remainder (relative error
 * < 1e-11). Below -128 it returns 0: softmax in float32, as vLLM computes it,
 * already underflows there (exp(-104) is below the smallest float32).
 */

const STEPS = 64;
const RANGE = 128;
const TABLE = new Float64Array(RANGE * STEPS + 1);
for (let j = 0; j < TABLE.length; j++) TABLE[j] = Math.exp(-j / STEPS);
/** Read-only. The native kernels (native.ts) copy it, so their exps equal these bit for bit. */
export const EXP_TABLE: Float64Array = TABLE;
const LIMIT = RANGE * STEPS;

export function expNonPositive(x: number): number {
  const y = -x * STEPS;
  if (!(y < LIMIT)) return 0; // also -Infinity and NaN
  if (y < 0) return Math.exp(x); // positive input: not the fast path's job
  const j = y | 0;
  const f = (j - y) / STEPS; // in (-1/64, 0]
  return TABLE[j] * (1 + f * (1 + f * (0.5 + f * (1 / 6 + f * (1 / 24)))));
}
