import { describe, expect, it } from "vitest";
import {
  type Candidate,
  compareFormat,
  exactFormatFailures,
  type FormatFigures,
  quantizedFormatFailures,
} from "./compare.ts";
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
    expect(exactFormatFailures("x", f)).toEqual([]);
    expect(quantizedFormatFailures("x", f, f)).toEqual([]);
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
    expect(exactFormatFailures("x", f)).toHaveLength(3);
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

describe("the criteria against the exact model", () => {
  const exact = async (rows: number[][], greedy: number[]) =>
    compareFormat([refCase("a", ROWS)], candidate(rows, greedy), { greedyTokens: 3 });
  // A near-tie flip (position 1) and a greedy run that leaves the reference after one token.
  const nearTieFlip = [
    [3, 2, 0, 0],
    [0, 1, 1.05, 0],
    [0, 0, 0, 2],
  ];
  const decisiveFlip = [
    [2, 3, 0, 0],
    [0, 1.05, 1, 0],
    [0, 0, 0, 2],
  ];

  it("holds an unquantized format to the exact function: a near-tie flip is already a failure", async () => {
    expect(exactFormatFailures("fp32", await exact(ROWS, [1, 2, 3]))).toEqual([]);
    const failures = exactFormatFailures("fp32", await exact(nearTieFlip, [1, 2, 3]));
    expect(failures).toHaveLength(2);
    expect(failures[0]).toMatch(/^fp32: top-1 equals the exact model's at 66\.67% of positions < 99\.90%/);
    expect(failures[1]).toMatch(/mean logprob error/);
  });

  it("holds a quantized format to llama.cpp's own distance from the exact model, no more", async () => {
    const baseline: FormatFigures = await exact(nearTieFlip, [1, 3]);
    // As close as the baseline, or closer: passes.
    expect(quantizedFormatFailures("q4", await exact(nearTieFlip, [1, 3]), baseline)).toEqual([]);
    expect(quantizedFormatFailures("q4", await exact(ROWS, [1, 2, 3]), baseline)).toEqual([]);
    // A decisive miss the baseline does not make, and a shorter greedy prefix: both named.
    const failures = quantizedFormatFailures("q4", await exact(decisiveFlip, [2]), baseline);
    expect(failures).toEqual([
      "q4: decisive top-1 agreement with the exact model 50.00% < llama.cpp's quantized run's 100.00%",
      "q4: median identical greedy prefix with the exact model 0 < llama.cpp's quantized run's 1",
    ]);
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
