import { describe, expect, it } from "vitest";
import { type Candidate, compareFormat, thresholdFailures } from "./compare.ts";
import { identicalPrefix, median } from "./greedy-compare.ts";
import type { ReferenceDist } from "./llama-reference.ts";
import type { ReferenceCase } from "./reference-cases.ts";

const VOCAB = 4;

function logSoftmax(row: readonly number[]): number[] {
  const max = Math.max(...row);
  const lse = max + Math.log(row.reduce((s, v) => s + Math.exp(v - max), 0));
  return row.map((v) => v - lse);
}

/** What llama-reference.ts would return if it recorded the whole row. */
function dist(row: readonly number[]): ReferenceDist {
  const lp = logSoftmax(row);
  const top = lp.map((logprob, id) => ({ id, logprob })).sort((a, b) => b.logprob - a.logprob);
  return { top, logprobOf: (id) => lp[id] };
}

function refCase(id: string, rows: number[][], opts: Partial<ReferenceCase> = {}): ReferenceCase {
  const tokens = rows.map((_, i) => i % VOCAB);
  return {
    id,
    promptTokens: tokens.slice(0, 1),
    tokens,
    dists: rows.map(dist),
    greedy: [1, 2, 3],
    firstScored: 0,
    ...opts,
  };
}

function candidate(rows: number[][], greedy?: number[]): Candidate {
  return {
    vocabSize: VOCAB,
    teacherForced: async () => Float32Array.from(rows.flat()),
    greedy: greedy && (async () => greedy),
  };
}

// Position 0: decisive (gap 1 nat); position 1: near-tie (gap 0.05); position 2: decisive.
const ROWS = [
  [3, 2, 0, 0],
  [0, 1.05, 1, 0],
  [0, 0, 0, 2],
];

describe("compareFormat", () => {
  it("scores an identical engine as perfect", async () => {
    const f = await compareFormat([refCase("a", ROWS)], candidate(ROWS, [1, 2, 3]), { greedyTokens: 3 });
    expect(f).toMatchObject({ positions: 3, decisive: 2, nearTies: 1, decisiveTop1Agreement: 1 });
    expect(f.overallTop1Agreement).toBe(1);
    expect(f.refTop1LogprobMad).toBeLessThan(1e-6);
    expect(f.greedy).toMatchObject({ median: 3, fullMatches: 1, divergences: [] });
    expect(thresholdFailures("x", f)).toEqual([]);
  });

  it("separates decisive misses from near-tie flips", async () => {
    const flipped = [
      [2, 3, 0, 0], // decisive position, other top-1
      [0, 1, 1.05, 0], // near-tie flip
      [0, 0, 0, 2],
    ];
    const f = await compareFormat([refCase("a", ROWS)], candidate(flipped, [1, 3]), { greedyTokens: 3 });
    expect(f.decisiveTop1Agreement).toBe(0.5);
    expect(f.nearTieTop1Agreement).toBe(0);
    expect(f.overallTop1Agreement).toBeCloseTo(1 / 3);
    expect(f.decisiveMisses).toHaveLength(1);
    expect(f.decisiveMisses[0]).toMatchObject({ prompt: "a", position: 0, candidateTop1: 1 });
    expect(f.greedy).toMatchObject({ median: 1, min: 1 });
    expect(f.greedy!.divergences[0]).toMatchObject({ at: 1, reference: 2, candidate: 3 });
    expect(thresholdFailures("x", f)).toHaveLength(2);
  });

  it("scores a prefix shared with an earlier prompt once", async () => {
    const f = await compareFormat(
      [refCase("a", ROWS), refCase("b", ROWS, { firstScored: 2 })],
      candidate(ROWS),
      { greedyTokens: 3 },
    );
    expect(f.positions).toBe(4);
    expect(f.byPrompt.b!.positions).toBe(1);
    expect(f.greedy).toBeUndefined();
  });
});

describe("greedy helpers", () => {
  it("counts identical runs that stopped early as full length", () => {
    expect(identicalPrefix([5, 6, 2], [5, 6, 2], 32)).toBe(32);
    expect(identicalPrefix([5, 6, 7], [5, 6, 2], 32)).toBe(2);
    expect(identicalPrefix([5, 6], [5, 6, 7], 32)).toBe(2);
  });

  it("takes the usual median", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
  });
});
