/**
 * Random-sampling kernels. min_p and top_k both keep an upper set of the
 * logits, so together they reduce to one logit threshold; the surviving ids
 * (ascending) are gathered once with their softmax weights, and top_p and the
 * draw only touch those:
 *   truncate (temperature, min_p, top_k) → top_p → draw.
 * Semantics follow vLLM's min_p processor and apply_top_k_top_p; see each
 * function.
 *
 * The full-vocabulary passes (collect, massHistogram, the top_k heap scan,
 * drawDense) run in the native addon when it is loaded (native.ts). It
 * repeats this arithmetic exactly, which is why the sums here run in four
 * interleaved lanes (one vector register there) or over the histogram.
 */
import { native } from "../native.ts";
import { expNonPositive } from "./exp.ts";
import { kthLargest, massBoundary, maxValue } from "./select.ts";

// top_p locates its boundary through a histogram of the mass by distance from
// the top logit (after temperature): BUCKETS_PER_NAT buckets per unit, up to the
// point where weights are 0.
const BUCKETS_PER_NAT = 8;
const LAST_BUCKET = 128 * BUCKETS_PER_NAT;

// Block size of drawDense's partial sums.
const BLOCK = 64;

// Where heapTopK and the native collect leave results of more than one number.
const results = new Float64Array(3);

export class Candidates {
  readonly ids: Int32Array;
  readonly weights: Float64Array;
  readonly blockSums: Float64Array;
  /** Histogram bucket of each candidate, filled when top_p follows. */
  readonly buckets: Uint16Array;
  readonly scratch: Float64Array;
  readonly histogram = new Float64Array(LAST_BUCKET + 1);
  count = 0;

  constructor(vocabSize: number) {
    this.ids = new Int32Array(vocabSize);
    this.weights = new Float64Array(vocabSize);
    this.blockSums = new Float64Array(Math.ceil(vocabSize / BLOCK));
    this.buckets = new Uint16Array(vocabSize);
    this.scratch = new Float64Array(vocabSize);
  }
}

/**
 * Temperature, min_p and top_k, in that order (vLLM's), into `c`: every
 * surviving token with weight exp((logit - max) / temperature), the
 * unnormalised softmax of the scaled logits, and its histogram bucket when
 * top_p follows. Returns the survivors' total weight. `minP` 0, `topK` <= 0
 * and `topP` 1 mean off.
 *
 * When top_p follows and many tokens survive, `c` receives only those top_p
 * can keep (found from the mass histogram of all survivors); the returned
 * total still covers every survivor, which is what top_p needs.
 */
export function truncate(
  row: Float32Array,
  length: number,
  temperature: number,
  minP: number,
  topK: number,
  topP: number,
  c: Candidates,
): number {
  const withBuckets = topP < 1;
  if (topK > 0 && topK < length && topK <= HEAP_TOP_K) {
    return truncateSmallTopK(row, length, temperature, minP, topK, withBuckets, c);
  }
  const max = maxValue(row, length);
  let threshold = minPThreshold(max, temperature, minP);
  if (topK > 0 && topK < length) threshold = Math.max(threshold, kthLargest(row, length, topK, c.scratch));
  if (!withBuckets) return collect(row, length, threshold, max, temperature, false, c);

  const total = massHistogram(row, length, threshold, max, temperature, c.histogram);
  const crossing = crossingBucket(c.histogram, topP * total);
  // Two spare buckets absorb rounding between this histogram and topP's own.
  const reach = Math.max(threshold, max - ((crossing + 3) * temperature) / BUCKETS_PER_NAT);
  collect(row, length, reach, max, temperature, true, c);
  return total;
}

/** Mass of each histogram bucket over the tokens >= threshold; returns the total, summed over the buckets. */
function massHistogram(
  row: Float32Array,
  length: number,
  threshold: number,
  max: number,
  temperature: number,
  histogram: Float64Array,
): number {
  if (native !== undefined) return native.massHistogram(row, length, threshold, max, temperature, histogram);
  const inv = 1 / temperature;
  histogram.fill(0);
  for (let i = 0; i < length; i++) {
    const v = row[i];
    if (v >= threshold && v > Number.NEGATIVE_INFINITY) {
      const distance = (max - v) * inv;
      histogram[Math.min(distance * BUCKETS_PER_NAT, LAST_BUCKET) | 0] += expNonPositive(-distance);
    }
  }
  let total = 0;
  for (let b = 0; b <= LAST_BUCKET; b++) total += histogram[b];
  return total;
}

/** First bucket, from the top, where the cumulative mass reaches `need`. */
function crossingBucket(histogram: Float64Array, need: number): number {
  let crossing = 0;
  let above = 0;
  while (crossing < LAST_BUCKET && above + histogram[crossing] < need) above += histogram[crossing++];
  return crossing;
}

/**
 * min_p keeps tokens whose probability (after temperature) is >= min_p times
 * the largest one: in logit space, logit >= max + temperature * ln(min_p).
 * -Infinity when off.
 */
export function minPThreshold(max: number, temperature: number, minP: number): number {
  return minP > 0 ? max + temperature * Math.log(minP) : Number.NEGATIVE_INFINITY;
}

// top_k keeps tokens whose logit is >= the k-th largest; ties with it all stay,
// as in vLLM. Taking the k-th over the whole row and combining it with min_p's
// threshold by max() equals vLLM's top_k over the min_p survivors: both keep the
// top of the same order.

// Up to this k, one pass with a bounded heap of (logit, id) finds the survivors
// without a second pass over the vocabulary.
const HEAP_TOP_K = 512;

function truncateSmallTopK(
  row: Float32Array,
  length: number,
  temperature: number,
  minP: number,
  k: number,
  withBuckets: boolean,
  c: Candidates,
): number {
  const ids = c.ids;
  const scan = results;
  if (native !== undefined) native.heapTopK(row, length, k, c.scratch, ids, scan);
  else heapTopK(row, length, k, c.scratch, ids, scan);
  const max = scan[0];
  const top = scan[1];
  const threshold = Math.max(minPThreshold(max, temperature, minP), top);
  if (scan[2] === 1) return collect(row, length, threshold, max, temperature, withBuckets, c);

  // The survivors are the heap's entries: walk them in id order.
  ids.subarray(0, k).sort();
  const { weights, buckets } = c;
  const inv = 1 / temperature;
  let n = 0;
  let total = 0;
  for (let j = 0; j < k; j++) {
    const id = ids[j];
    const v = row[id];
    if (v >= threshold && v > Number.NEGATIVE_INFINITY) {
      const distance = (max - v) * inv;
      const w = expNonPositive(-distance);
      ids[n] = id;
      weights[n] = w;
      if (withBuckets) buckets[n] = Math.min(distance * BUCKETS_PER_NAT, LAST_BUCKET);
      total += w;
      n++;
    }
  }
  c.count = n;
  return total;
}

/**
 * The k largest of the row (NaN as -inf) into a min-heap on heap/ids. Writes
 * [max, k-th largest, 1 when a value left out of the heap ties the k-th] to `out`.
 */
function heapTopK(
  row: Float32Array,
  length: number,
  k: number,
  heap: Float64Array,
  ids: Int32Array,
  out: Float64Array,
): void {
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < k; i++) {
    const v = Number.isNaN(row[i]) ? Number.NEGATIVE_INFINITY : row[i];
    if (v > max) max = v;
    heapPush(heap, ids, i, v, i);
  }
  // Largest value seen equal to the heap's minimum yet left out of the heap
  // (rejected or evicted): if it ties the final k-th, tokens outside the heap survive too.
  let tie = Number.NaN;
  let top = heap[0];
  for (let i = k; i < length; i++) {
    const v = row[i];
    if (v > top) {
      if (v > max) max = v;
      tie = top;
      heap[0] = v;
      ids[0] = i;
      siftDown(heap, ids, k);
      top = heap[0];
    } else if (v === top) tie = v;
  }
  out[0] = max;
  out[1] = top;
  out[2] = tie === top ? 1 : 0;
}

function heapPush(values: Float64Array, ids: Int32Array, size: number, v: number, id: number): void {
  let i = size;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (values[parent] <= v) break;
    values[i] = values[parent];
    ids[i] = ids[parent];
    i = parent;
  }
  values[i] = v;
  ids[i] = id;
}

function siftDown(values: Float64Array, ids: Int32Array, size: number): void {
  const v = values[0];
  const id = ids[0];
  let i = 0;
  for (;;) {
    let child = 2 * i + 1;
    if (child >= size) break;
    if (child + 1 < size && values[child + 1] < values[child]) child++;
    if (values[child] >= v) break;
    values[i] = values[child];
    ids[i] = ids[child];
    i = child;
  }
  values[i] = v;
  ids[i] = id;
}

/**
 * Gathers every finite logit >= `threshold` with its weight
 * exp((logit - max) / temperature), the unnormalised softmax of the
 * temperature-scaled logits, and (for top_p) its histogram bucket. Returns the
 * total weight.
 */
function collect(
  row: Float32Array,
  length: number,
  threshold: number,
  max: number,
  temperature: number,
  withBuckets: boolean,
  c: Candidates,
): number {
  const { ids, weights, buckets } = c;
  if (native !== undefined) {
    c.count = native.collect(
      row,
      length,
      threshold,
      max,
      temperature,
      withBuckets,
      ids,
      weights,
      buckets,
      results,
    );
    return results[0];
  }
  const inv = 1 / temperature;
  let n = 0;
  for (let i = 0; i < length; i++) {
    const v = row[i];
    if (v >= threshold && v > Number.NEGATIVE_INFINITY) {
      const distance = (max - v) * inv;
      ids[n] = i;
      weights[n] = expNonPositive(-distance);
      if (withBuckets) buckets[n] = Math.min(distance * BUCKETS_PER_NAT, LAST_BUCKET);
      n++;
    }
  }
  c.count = n;
  return sum4(weights, n);
}

/** Sum of `a[0..n)` in four interleaved lanes (the tail in the first), as the native kernels add. */
function sum4(a: Float64Array, n: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = 0;
  for (; i + 3 < n; i += 4) {
    s0 += a[i];
    s1 += a[i + 1];
    s2 += a[i + 2];
    s3 += a[i + 3];
  }
  for (; i < n; i++) s0 += a[i];
  return s0 + s1 + s2 + s3;
}

/**
 * top_p as vLLM computes it: sort ascending, drop the tokens whose cumulative
 * probability is <= 1 - p, always keep the largest. Equivalently a token stays
 * when the mass ranked strictly above it is < p. Ranking is by weight, lower id
 * first on ties (vLLM leaves tie order to its sort kernel). `total` is the
 * weight of all survivors of the earlier filters, as truncate() returned it;
 * call only with 0 < p < 1. Returns the weight of the tokens kept.
 *
 * No sort: the histogram finds the bucket where the cumulative mass crosses
 * p * total; everything above it stays, everything below goes, and only that
 * bucket's weights are resolved exactly.
 */
export function topP(c: Candidates, p: number, total: number): number {
  const { ids, weights, buckets, scratch, histogram } = c;
  const n = c.count;
  const need = p * total;

  histogram.fill(0);
  for (let j = 0; j < n; j++) histogram[buckets[j]] += weights[j];
  const crossing = crossingBucket(histogram, need);
  let massAbove = 0;
  for (let b = 0; b < crossing; b++) massAbove += histogram[b];

  let size = 0;
  for (let j = 0; j < n; j++) if (buckets[j] === crossing) scratch[size++] = weights[j];
  // An empty crossing bucket only happens when rounding kept the sum just short of `need`: keep all.
  const boundary = size > 0 ? massBoundary(scratch, size, need - massAbove) : 0;

  // Mass strictly above the boundary, then how many tokens equal to it still fit (in id order).
  let above = massAbove;
  let ties = 0;
  for (let j = 0; j < size; j++) {
    if (scratch[j] > boundary) above += scratch[j];
    else if (scratch[j] === boundary) ties++;
  }
  let tiesKept = 0;
  while (tiesKept < ties && above + tiesKept * boundary < need) tiesKept++;
  if (above === 0 && tiesKept === 0) tiesKept = 1; // the top token always stays

  let kept = 0;
  let m = 0;
  for (let j = 0; j < n; j++) {
    const w = weights[j];
    if (w > boundary || (w === boundary && tiesKept-- > 0)) {
      ids[m] = ids[j];
      weights[m] = w;
      kept += w;
      m++;
    }
  }
  c.count = m;
  return kept;
}

/**
 * Inverse-CDF draw: walks the candidates in id order and returns the first
 * whose cumulative weight exceeds `u * total` (u uniform in [0, 1)). One
 * uniform per token keeps seeded streams simple. -1 when nothing is left.
 */
export function draw(c: Candidates, total: number, u: number): number {
  const { ids, weights } = c;
  const target = u * total;
  let acc = 0;
  let last = -1;
  for (let j = 0; j < c.count; j++) {
    const w = weights[j];
    if (w <= 0) continue;
    acc += w;
    last = ids[j];
    if (acc > target) return last;
  }
  // Rounding can leave the target just above the final sum.
  return last >= 0 ? last : c.count > 0 ? ids[0] : -1;
}

/**
 * Temperature-only sampling straight from the row, the common default: one
 * pass of exps keeps a partial sum per block of 64 tokens, the draw walks the
 * block sums and recomputes the exps of one block only. Same inverse-CDF draw
 * in id order as draw(), without gathering the whole vocabulary. -1 when every
 * logit is -inf.
 */
export function drawDense(
  row: Float32Array,
  length: number,
  temperature: number,
  u: number,
  c: Candidates,
): number {
  if (native !== undefined) return native.drawDense(row, length, temperature, u, c.blockSums);
  const max = maxValue(row, length);
  if (!(max > Number.NEGATIVE_INFINITY)) return -1;
  const inv = 1 / temperature;
  const sums = c.blockSums;
  const blocks = Math.ceil(length / BLOCK);
  let total = 0;
  for (let b = 0; b < blocks; b++) {
    const end = Math.min(length, (b + 1) * BLOCK);
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    let i = b * BLOCK;
    for (; i + 3 < end; i += 4) {
      s0 += expNonPositive((row[i] - max) * inv);
      s1 += expNonPositive((row[i + 1] - max) * inv);
      s2 += expNonPositive((row[i + 2] - max) * inv);
      s3 += expNonPositive((row[i + 3] - max) * inv);
    }
    for (; i < end; i++) s0 += expNonPositive((row[i] - max) * inv);
    const s = s0 + s1 + s2 + s3;
    sums[b] = s;
    total += s;
  }
  const target = u * total;
  let acc = 0;
  let last = -1;
  for (let b = 0; b < blocks; b++) {
    if (sums[b] <= 0) continue;
    if (acc + sums[b] <= target) {
      acc += sums[b];
      last = b;
      continue;
    }
    const end = Math.min(length, (b + 1) * BLOCK);
    let lastInBlock = -1;
    for (let i = b * BLOCK; i < end; i++) {
      const w = expNonPositive((row[i] - max) * inv);
      if (w <= 0) continue;
      acc += w;
      lastInBlock = i;
      if (acc > target) return i;
    }
    // Rounding: the block's recount fell just short of its stored sum.
    return lastInBlock;
  }
  // Rounding can leave the target just above the final sum: take the last token with weight.
  return last >= 0
    ? lastTokenWithWeight(row, last * BLOCK, Math.min(length, (last + 1) * BLOCK), max, inv)
    : -1;
}

function lastTokenWithWeight(
  row: Float32Array,
  start: number,
  end: number,
  max: number,
  inv: number,
): number {
  for (let i = end - 1; i >= start; i--) if (expNonPositive((row[i] - max) * inv) > 0) return i;
  return -1;
}
