/**
 * Log-probabilities of a logits row: log-sum-exp in float64, the rank of a
 * token among the row, and the floor applied to -inf before anything leaves
 * the engine (JSON has no infinities; vLLM's server uses the same floor).
 * logSumExp and rankOf run in the native addon when it is loaded (native.ts).
 */
import { native } from "../native.ts";
import { expNonPositive } from "./exp.ts";
import { maxValue, topN } from "./select.ts";

export const LOGPROB_FLOOR = -9999.0;

/** log(sum(exp(row))) accumulated in float64; -Infinity when every entry is -inf. */
export function logSumExp(row: Float32Array, length = row.length): number {
  if (native !== undefined) return native.logSumExp(row, length);
  const max = maxValue(row, length);
  if (max === Number.NEGATIVE_INFINITY) return max;
  // Four partial sums so the exps of neighbours overlap.
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = 0;
  for (; i + 3 < length; i += 4) {
    s0 += expNonPositive(row[i] - max);
    s1 += expNonPositive(row[i + 1] - max);
    s2 += expNonPositive(row[i + 2] - max);
    s3 += expNonPositive(row[i + 3] - max);
  }
  for (; i < length; i++) s0 += expNonPositive(row[i] - max);
  return max + Math.log(s0 + s1 + s2 + s3);
}

/** `logit - lse`, with -inf (and NaN) floored. */
export function toLogprob(logit: number, lse: number): number {
  const lp = logit - lse;
  return Number.isNaN(lp) ? LOGPROB_FLOOR : Math.max(lp, LOGPROB_FLOOR);
}

/**
 * 1-based rank of `row[tokenId]`: how many entries are >= it, the token itself
 * included (vLLM counts `logprobs >= token_logprob`, so ties share the worse rank).
 */
export function rankOf(row: Float32Array, tokenId: number, length = row.length): number {
  if (native !== undefined) return native.rankOf(row, length, tokenId);
  const v = row[tokenId];
  let c0 = 0;
  let c1 = 0;
  let c2 = 0;
  let c3 = 0;
  let i = 0;
  for (; i + 3 < length; i += 4) {
    if (row[i] >= v) c0++;
    if (row[i + 1] >= v) c1++;
    if (row[i + 2] >= v) c2++;
    if (row[i + 3] >= v) c3++;
  }
  for (; i < length; i++) if (row[i] >= v) c0++;
  return c0 + c1 + c2 + c3;
}

/**
 * The `ids.length` most likely tokens of a row as logprobs (most likely first, lower id first on
 * ties), given the row's log-sum-exp; `ids`/`values` are caller-owned scratch of that length.
 */
export function topLogprobs(
  row: Float32Array,
  lse: number,
  ids: Int32Array,
  values: Float64Array,
): { tokenId: number; logprob: number }[] {
  if (ids.length === 0) return [];
  const n = topN(row, row.length, ids.length, ids, values);
  const out: { tokenId: number; logprob: number }[] = new Array(n);
  for (let j = 0; j < n; j++) out[j] = { tokenId: ids[j]!, logprob: toLogprob(values[j]!, lse) };
  return out;
}
