/**
 * In-place edits of a logits row that remove or shift individual tokens:
 * structured-output bitmask, allowed-token whitelist, banned ids, logit bias.
 */

const NEG_INF = Number.NEGATIVE_INFINITY;

/**
 * Sets every token whose bit is clear in `mask` (bit i of word i >> 5 = token
 * i allowed, as xgrammar's bitmask) to -inf. Tokens past the end of the mask are
 * disallowed.
 */
export function applyBitmask(row: Float32Array, mask: Uint32Array, length = row.length): void {
  const words = Math.min(mask.length, Math.ceil(length / 32));
  for (let w = 0; w < words; w++) {
    const bits = mask[w];
    if (bits === 0xffffffff) continue;
    const base = w * 32;
    const end = Math.min(base + 32, length);
    for (let i = base; i < end; i++) if (((bits >>> (i - base)) & 1) === 0) row[i] = NEG_INF;
  }
  if (words * 32 < length) row.fill(NEG_INF, words * 32, length);
}

/** Writes `src` into `dst` keeping only `allowed` ids; everything else becomes -inf. */
export function copyAllowed(
  dst: Float32Array,
  src: Float32Array,
  allowed: Int32Array,
  length = dst.length,
): void {
  dst.fill(NEG_INF, 0, length);
  for (let j = 0; j < allowed.length; j++) {
    const id = allowed[j];
    dst[id] = src[id];
  }
}

/** Sets the given ids to -inf. */
export function banTokens(row: Float32Array, ids: Int32Array): void {
  for (let j = 0; j < ids.length; j++) row[ids[j]] = NEG_INF;
}

/** Adds `values[j]` to the logit of `ids[j]`. */
export function addLogitBias(row: Float32Array, ids: Int32Array, values: Float32Array): void {
  for (let j = 0; j < ids.length; j++) row[ids[j]] += values[j];
}
