/**
 * Free-running greedy agreement: each engine continues each prompt on its own (incremental decode,
 * KV cache and all) and the shared prefix with llama.cpp's continuation is counted.
 */
import type { Candidate } from "./compare.ts";
import type { ReferenceCase } from "./reference-cases.ts";

/** Where a free-running greedy continuation first left llama.cpp's. */
export interface GreedyDivergence {
  prompt: string;
  at: number;
  reference: number;
  candidate: number;
  /**
   * llama.cpp's (batch) logprob of its own pick minus that of the candidate's pick at the split:
   * small means the split was at a near-tie; negative means the batch pass itself preferred the
   * candidate's token there. Absent when the candidate's token is outside the recorded top entries
   * or the split lies beyond the teacher-forced continuation.
   */
  refLogprobGap?: number;
  text?: { reference: string; candidate: string };
}

export interface GreedyFigures {
  tokens: number;
  identicalPrefix: Record<string, number>;
  median: number;
  min: number;
  fullMatches: number;
  divergences: GreedyDivergence[];
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Tokens the two greedy runs share from the start; identical runs count as `n` even if EOS ended them. */
export function identicalPrefix(a: readonly number[], b: readonly number[], n: number): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i === a.length && i === b.length ? n : i;
}

export async function compareGreedy(
  cases: readonly ReferenceCase[],
  candidate: Candidate,
  n: number,
  detokenize?: (ids: readonly number[]) => string,
): Promise<GreedyFigures | undefined> {
  if (!candidate.greedy) return undefined;
  const identical: Record<string, number> = {};
  const divergences: GreedyDivergence[] = [];
  for (const c of cases) {
    const mine = await candidate.greedy(c.promptTokens, n);
    const at = identicalPrefix(c.greedy, mine, n);
    identical[c.id] = at;
    if (at === n) continue;
    // The teacher-forced distribution at the split says whether it was a near-tie for llama.cpp.
    const dist = c.dists[c.promptTokens.length - 1 + at];
    const ref = c.greedy[at] ?? -1;
    const cand = mine[at] ?? -1;
    const refLp = dist?.logprobOf(ref);
    const candLp = dist?.logprobOf(cand);
    divergences.push({
      prompt: c.id,
      at,
      reference: ref,
      candidate: cand,
      refLogprobGap: refLp !== undefined && candLp !== undefined ? refLp - candLp : undefined,
      ...(detokenize && { text: { reference: detokenize([ref]), candidate: detokenize([cand]) } }),
    });
  }
  const prefixes = Object.values(identical);
  return {
    tokens: n,
    identicalPrefix: identical,
    median: median(prefixes),
    min: Math.min(...prefixes),
    fullMatches: prefixes.filter((p) => p === n).length,
    divergences,
  };
}
