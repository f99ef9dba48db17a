import { describe, expect, it } from "vitest";
import { AttentionMask } from "../../src/core/runner/attention-mask.ts";

/** What a mask of these lengths holds, built from nothing. */
function expected(lengths: readonly number[], width: number): bigint[] {
  return lengths.flatMap((len) => Array.from({ length: width }, (_, p) => (p < len ? 1n : 0n)));
}

describe("AttentionMask", () => {
  it("matches a freshly built mask through growing, shrinking, moving and resized batches", () => {
    const mask = new AttentionMask();
    const steps: [number[], number][] = [
      [[3], 8],
      [[4], 8],
      [[4, 2, 7], 8],
      [[5, 3, 8], 8],
      // A row finishes and the last one moves into its place: row 1 now holds row 2's length.
      [[6, 8], 8],
      [[1, 1, 1, 1, 1], 8],
      [[0, 8, 2, 8, 3], 8],
      // The cache's width changes: everything is laid out again.
      [[9, 2], 12],
      [[10, 3], 12],
    ];
    for (const [lengths, width] of steps) {
      const t = mask.rows(lengths, width);
      expect(t.type).toBe("int64");
      expect(t.dims).toEqual([lengths.length, width]);
      expect([...(t.data as BigInt64Array)]).toEqual(expected(lengths, width));
    }
  });

  it("hands out the same tensor while the batch's shape stays, a new one when it changes", () => {
    const mask = new AttentionMask();
    const first = mask.rows([2, 3], 6);
    expect(mask.rows([3, 4], 6)).toBe(first);
    const wider = mask.rows([3, 4, 1], 6);
    expect(wider).not.toBe(first);
    expect(mask.rows([2, 4, 1], 6)).toBe(wider);
  });
});
