import { describe, expect, it } from "vitest";
import { detectRepetition } from "../../src/core/sample/repetition.ts";

const params = (maxPatternSize: number, minPatternSize: number, minCount: number) => ({
  maxPatternSize,
  minPatternSize,
  minCount,
});

describe("detectRepetition", () => {
  it("fires on a loop of the pattern length once minCount copies are at the tail, not before", () => {
    const p = params(4, 2, 3);
    const loop = [9, 8, 1, 2, 3, 1, 2, 3, 1, 2];
    expect(detectRepetition(loop, p)).toBe(false); // two copies of [1,2,3] and a partial
    expect(detectRepetition([...loop, 3], p)).toBe(true);
  });

  it("checks every size from min to max; min 0 counts as 1", () => {
    expect(detectRepetition([4, 7, 7, 7], params(3, 0, 3))).toBe(true);
    expect(detectRepetition([4, 7, 7, 7], params(3, 2, 3))).toBe(false);
    expect(detectRepetition([1, 2, 1, 2], params(2, 1, 2))).toBe(true);
  });

  it("needs the copies back to back and at the very end", () => {
    expect(detectRepetition([1, 2, 5, 1, 2], params(2, 2, 2))).toBe(false);
    expect(detectRepetition([1, 2, 1, 2, 5], params(2, 2, 2))).toBe(false);
  });

  it("is disabled by max 0, minCount < 2 or min > max", () => {
    const tokens = [5, 5, 5, 5, 5, 5];
    expect(detectRepetition(tokens, params(0, 1, 2))).toBe(false);
    expect(detectRepetition(tokens, params(3, 1, 1))).toBe(false);
    expect(detectRepetition(tokens, params(2, 3, 2))).toBe(false);
    expect(detectRepetition(tokens, params(1, 1, 6))).toBe(true);
    expect(detectRepetition(tokens, params(1, 1, 7))).toBe(false);
  });
});
