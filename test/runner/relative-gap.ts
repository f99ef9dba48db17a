/** Largest |x - y| over the largest |x| (at least 1): how far two runs' float outputs are apart. */
export function relativeGap(x: Float32Array, y: Float32Array): number {
  let gap = 0;
  let scale = 1;
  for (let i = 0; i < x.length; i++) {
    gap = Math.max(gap, Math.abs(x[i]! - y[i]!));
    scale = Math.max(scale, Math.abs(x[i]!));
  }
  return gap / scale;
}
