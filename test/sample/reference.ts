/**
 * A literal float64 transcription of vLLM's random-sampling filters
 * (temperature → min_p → top_k → top_p with full sorts), used as the oracle
 * for the optimised kernels. Returns the normalised probability of every token.
 */

export interface FilterParams {
  temperature: number;
  minP: number;
  topK: number;
  topP: number;
}

function softmax(values: readonly number[]): number[] {
  const max = Math.max(...values.filter((v) => v > Number.NEGATIVE_INFINITY));
  const exps = values.map((v) => (v === Number.NEGATIVE_INFINITY ? 0 : Math.exp(v - max)));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / sum);
}

export function referenceDistribution(logits: ArrayLike<number>, p: FilterParams): number[] {
  let scaled = Array.from(logits, (v) => v / p.temperature);
  const n = scaled.length;
  if (p.minP > 0) {
    const probs = softmax(scaled);
    const cut = Math.max(...probs) * p.minP;
    scaled = scaled.map((v, i) => (probs[i] < cut ? Number.NEGATIVE_INFINITY : v));
  }
  // Ascending; among equal values the higher id first, so lower ids rank higher.
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => scaled[a] - scaled[b] || b - a);
  if (p.topK > 0 && p.topK < n) {
    const kth = scaled[order[n - p.topK]];
    scaled = scaled.map((v) => (v < kth ? Number.NEGATIVE_INFINITY : v));
  }
  if (p.topP < 1) {
    const probs = softmax(order.map((i) => scaled[i]));
    let cum = 0;
    const drop: number[] = [];
    probs.forEach((q, j) => {
      cum += q;
      if (cum <= 1 - p.topP && j < n - 1) drop.push(order[j]);
    });
    for (const i of drop) scaled[i] = Number.NEGATIVE_INFINITY;
  }
  return softmax(scaled);
}
