/**
 * Selection kernels over typed arrays: argmax, maximum, k-th largest value,
 * the probability-mass boundary used by top_p, and the n largest entries for
 * logprobs. Average O(n), no full sorts, no allocation: callers pass the
 * scratch buffers. The full-row scans run in the native addon when it is
 * loaded (native.ts), with the same results.
 */
import { native } from "../native.ts";

// The row scans keep four independent accumulators: a single compare chain
// leaves most of the CPU idle, and these loops run over the vocabulary every step.

/** Index of the largest value (lowest index on ties, as torch.argmax); NaN never wins; -1 when none is > -inf. */
export function argmax(row: Float32Array, length = row.length): number {
  if (native !== undefined) return native.argmax(row, length);
  let m0 = Number.NEGATIVE_INFINITY;
  let m1 = m0;
  let m2 = m0;
  let m3 = m0;
  let i0 = -1;
  let i1 = -1;
  let i2 = -1;
  let i3 = -1;
  let i = 0;
  for (; i + 3 < length; i += 4) {
    const v0 = row[i];
    const v1 = row[i + 1];
    const v2 = row[i + 2];
    const v3 = row[i + 3];
    if (v0 > m0) {
      m0 = v0;
      i0 = i;
    }
    if (v1 > m1) {
      m1 = v1;
      i1 = i + 1;
    }
    if (v2 > m2) {
      m2 = v2;
      i2 = i + 2;
    }
    if (v3 > m3) {
      m3 = v3;
      i3 = i + 3;
    }
  }
  for (; i < length; i++) {
    if (row[i] > m0) {
      m0 = row[i];
      i0 = i;
    }
  }
  let best = i0;
  let bestVal = m0;
  if (m1 > bestVal || (i1 >= 0 && m1 === bestVal && i1 < best)) {
    bestVal = m1;
    best = i1;
  }
  if (m2 > bestVal || (i2 >= 0 && m2 === bestVal && i2 < best)) {
    bestVal = m2;
    best = i2;
  }
  if (m3 > bestVal || (i3 >= 0 && m3 === bestVal && i3 < best)) best = i3;
  return best;
}

/** Largest value of `row[0..length)`, ignoring NaN; -Infinity when empty. */
export function maxValue(row: Float32Array, length = row.length): number {
  if (native !== undefined) return native.maxValue(row, length);
  let m0 = Number.NEGATIVE_INFINITY;
  let m1 = m0;
  let m2 = m0;
  let m3 = m0;
  let i = 0;
  for (; i + 3 < length; i += 4) {
    const v0 = row[i];
    const v1 = row[i + 1];
    const v2 = row[i + 2];
    const v3 = row[i + 3];
    if (v0 > m0) m0 = v0;
    if (v1 > m1) m1 = v1;
    if (v2 > m2) m2 = v2;
    if (v3 > m3) m3 = v3;
  }
  for (; i < length; i++) if (row[i] > m0) m0 = row[i];
  return Math.max(m0, m1, m2, m3);
}

/**
 * The k-th largest of `values[0..n)` (1 <= k <= n), NaN counted as -Infinity:
 * quickselect on `scratch` (length >= n).
 */
export function kthLargest(values: Float32Array, n: number, k: number, scratch: Float64Array): number {
  if (k <= 0 || k > n) throw new RangeError(`k=${k} outside [1, ${n}]`);
  if (native !== undefined) return native.kthLargest(values, n, k);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    scratch[i] = Number.isNaN(v) ? Number.NEGATIVE_INFINITY : v;
  }
  return quickselectDesc(scratch, 0, n, k - 1);
}

/** Value at descending rank `rank` (0-based) of a[lo..hi); reorders a. */
function quickselectDesc(a: Float64Array, lo: number, hi: number, rank: number): number {
  let left = lo;
  let right = hi - 1;
  const target = lo + rank;
  while (right > left) {
    const pivot = medianOf3(a[left], a[(left + right) >> 1], a[right]);
    let i = left;
    let j = right;
    while (i <= j) {
      while (a[i] > pivot) i++;
      while (a[j] < pivot) j--;
      if (i <= j) {
        const t = a[i];
        a[i] = a[j];
        a[j] = t;
        i++;
        j--;
      }
    }
    if (target <= j) right = j;
    else if (target >= i) left = i;
    else return a[target];
  }
  return a[target];
}

function medianOf3(x: number, y: number, z: number): number {
  return Math.max(Math.min(x, y), Math.min(Math.max(x, y), z));
}

/**
 * Top-p boundary: with `values[0..n)` in descending order v(1) >= v(2) >= ...,
 * returns v(m) for the smallest m whose prefix sum reaches `need` (the last
 * value when none does). Reorders `values`. Weighted quickselect, average O(n).
 */
export function massBoundary(values: Float64Array, n: number, need: number): number {
  let lo = 0;
  let hi = n;
  let remaining = need;
  while (hi - lo > 16) {
    const pivot = medianOf3(values[lo], values[(lo + hi) >> 1], values[hi - 1]);
    // Three-way partition: [lo, gt) > pivot, [gt, lt) == pivot, [lt, hi) < pivot.
    let gt = lo;
    let lt = hi;
    let i = lo;
    let massGreater = 0;
    let massEqual = 0;
    while (i < lt) {
      const v = values[i];
      if (v > pivot) {
        values[i] = values[gt];
        values[gt] = v;
        gt++;
        i++;
        massGreater += v;
      } else if (v < pivot) {
        lt--;
        values[i] = values[lt];
        values[lt] = v;
      } else {
        i++;
        massEqual += v;
      }
    }
    if (massGreater >= remaining && gt > lo) hi = gt;
    else if (massGreater + massEqual >= remaining || lt === hi) return pivot;
    else {
      remaining -= massGreater + massEqual;
      lo = lt;
    }
  }
  // Few left: insertion sort descending, then walk the prefix sums.
  for (let i = lo + 1; i < hi; i++) {
    const v = values[i];
    let j = i - 1;
    while (j >= lo && values[j] < v) {
      values[j + 1] = values[j];
      j--;
    }
    values[j + 1] = v;
  }
  let acc = 0;
  for (let i = lo; i < hi; i++) {
    acc += values[i];
    if (acc >= remaining) return values[i];
  }
  return values[hi - 1];
}

/**
 * The `n` largest entries of `row[0..length)` into outIds/outVals, sorted
 * descending, lower index first on ties. Insertion into a sorted window: only
 * values beating the current n-th are inserted, so it is ~one pass for small n.
 * Returns how many were written (min(n, length)).
 */
export function topN(
  row: Float32Array,
  length: number,
  n: number,
  outIds: Int32Array,
  outVals: Float64Array,
): number {
  if (native !== undefined) return native.topN(row, length, n, outIds, outVals);
  const want = Math.min(n, length);
  if (want <= 0) return 0;
  let size = 0;
  // Entry bar: once the window is full, a value must beat the current n-th
  // (strictly: an equal later index ranks below the earlier ones).
  let bar = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < length; i++) {
    const v = row[i];
    if (size === want ? !(v > bar) : Number.isNaN(v)) continue;
    let j = size < want ? size++ : want - 1;
    while (j > 0 && outVals[j - 1] < v) {
      outVals[j] = outVals[j - 1];
      outIds[j] = outIds[j - 1];
      j--;
    }
    outVals[j] = v;
    outIds[j] = i;
    if (size === want) bar = outVals[want - 1];
  }
  return size;
}
