/**
 * Repetition detection (vLLM's repetition_detection): after each generated
 * token, does the output end with `minCount` back-to-back copies of its last L
 * tokens, for some pattern length L in [minPatternSize, maxPatternSize]?
 * On a hit the caller finishes the sequence ("repetition").
 */

export interface RepetitionDetection {
  /** Longest pattern checked; 0 disables detection. */
  maxPatternSize: number;
  /** Shortest pattern checked; 0 is treated as 1. */
  minPatternSize: number;
  /** Copies needed in a row; below 2 disables detection. */
  minCount: number;
}

export function detectRepetition(outputTokenIds: readonly number[], params: RepetitionDetection): boolean {
  const { maxPatternSize, minCount } = params;
  const minPatternSize = Math.max(params.minPatternSize, 1);
  if (maxPatternSize <= 0 || minCount < 2 || minPatternSize > maxPatternSize) return false;
  const n = outputTokenIds.length;
  for (let size = minPatternSize; size <= maxPatternSize; size++) {
    // Longer patterns need even more tokens.
    if (size * minCount > n) return false;
    if (endsWithRepeats(outputTokenIds, size, minCount)) return true;
  }
  return false;
}

function endsWithRepeats(tokens: readonly number[], size: number, count: number): boolean {
  const n = tokens.length;
  for (let back = 1; back <= size; back++) {
    const token = tokens[n - back];
    for (let copy = 1; copy < count; copy++) if (tokens[n - copy * size - back] !== token) return false;
  }
  return true;
}
