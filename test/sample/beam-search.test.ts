import { describe, expect, it } from "vitest";
import { BeamSearch, beamCandidates, beamScore } from "../../src/core/sample/beam-search.ts";

const EOS = 9;

describe("beamScore", () => {
  it("divides the cumulative logprob by length^penalty, dropping a final EOS from the length", () => {
    expect(beamScore(-1.2, 6, EOS, 3, 1)).toBeCloseTo(-0.2, 12);
    expect(beamScore(-1.2, 6, EOS, EOS, 1)).toBeCloseTo(-0.24, 12);
    expect(beamScore(-1.2, 6, EOS, EOS, 2)).toBeCloseTo(-1.2 / 25, 12);
    expect(beamScore(-1.2, 6, EOS, 3, 0.5)).toBeCloseTo(-1.2 / Math.sqrt(6), 12);
    expect(beamScore(-1.2, 6, EOS, 3, 0)).toBeCloseTo(-1.2, 12);
  });
});

describe("BeamSearch", () => {
  // Prompt of 3 tokens, width 2. Hand-computed scores (length penalty 1):
  // step 1: [5] -0.5/4 = -0.125, [6] -1/4 = -0.25, [7] -2/4 = -0.5, EOS -0.7/3 ≈ -0.233 (finished)
  // step 2: [5,8] -0.6/5 = -0.12, [6,8] -1.05/5 = -0.21, [6,4] -4/5, [5,EOS] -0.7/4 = -0.175 (finished)
  function run(options: { includeStopStrInOutput?: boolean } = {}) {
    const search = new BeamSearch(3, { beamWidth: 2, maxTokens: 2, eosTokenId: EOS, ...options });
    expect(search.candidatesPerBeam).toBe(4);
    expect(search.live).toEqual([{ id: 0, parentId: undefined, tokenIds: [], cumulativeLogprob: 0 }]);
    const step1 = search.step([
      [
        { tokenId: 5, logprob: -0.5 },
        { tokenId: 6, logprob: -1.0 },
        { tokenId: EOS, logprob: -0.7 },
        { tokenId: 7, logprob: -2.0 },
      ],
    ]);
    expect(step1.map((b) => [b.tokenIds, b.parentId])).toEqual([
      [[5], 0],
      [[6], 0],
    ]);
    const step2 = search.step([
      [
        { tokenId: 8, logprob: -0.1 },
        { tokenId: EOS, logprob: -0.2 },
      ],
      [
        { tokenId: 8, logprob: -0.05 },
        { tokenId: 4, logprob: -3 },
      ],
    ]);
    expect(step2.map((b) => [b.tokenIds, b.parentId])).toEqual([
      [[5, 8], step1[0].id],
      [[6, 8], step1[1].id],
    ]);
    expect(new Set([0, ...step1.map((b) => b.id), ...step2.map((b) => b.id)]).size).toBe(5);
    expect(search.done).toBe(true);
    return search.results();
  }

  it("ranks live and finished beams together by vLLM's score", () => {
    const results = run();
    expect(results.map((r) => [r.tokenIds, r.finishReason])).toEqual([
      [[5, 8], "length"],
      [[5], "stop"],
    ]);
    expect(results[0].score).toBeCloseTo(-0.12, 12);
    expect(results[1]).toMatchObject({ cumulativeLogprob: expect.closeTo(-0.7, 12), stopReason: EOS });
    expect(results[1].score).toBeCloseTo(-0.175, 12);
  });

  it("keeps the EOS in a finished beam when asked, without changing its score", () => {
    const results = run({ includeStopStrInOutput: true });
    expect(results[1].tokenIds).toEqual([5, EOS]);
    expect(results[1].score).toBeCloseTo(-0.175, 12);
  });

  it("treats EOS as an ordinary token under ignoreEos (its length still excludes a final EOS)", () => {
    const search = new BeamSearch(1, { beamWidth: 1, maxTokens: 1, eosTokenId: EOS, ignoreEos: true });
    search.step([
      [
        { tokenId: EOS, logprob: -0.3 },
        { tokenId: 2, logprob: -0.7 }, // -0.7 / 2 = -0.35 loses to -0.3 / 1
      ],
    ]);
    expect(search.live.map((b) => b.tokenIds)).toEqual([[EOS]]);
    const [best] = search.results();
    expect(best.finishReason).toBe("length");
    expect(best.score).toBe(-0.3 / 1);
  });

  it("keeps expansion order on equal scores (stable, like Python's sorted)", () => {
    const search = new BeamSearch(2, { beamWidth: 1, maxTokens: 1, eosTokenId: EOS });
    search.step([
      [
        { tokenId: 4, logprob: -1 },
        { tokenId: 3, logprob: -1 },
      ],
    ]);
    expect(search.live[0].tokenIds).toEqual([4]);
  });

  it("is done when every beam finished", () => {
    const search = new BeamSearch(2, { beamWidth: 2, maxTokens: 5, eosTokenId: EOS });
    search.step([[{ tokenId: EOS, logprob: -0.1 }]]);
    expect(search.done).toBe(true);
    expect(search.results()).toHaveLength(1);
    expect(() => search.step([])).toThrow();
  });
});

describe("beamCandidates", () => {
  it("lists the sampled token first, then the alternatives not already listed", () => {
    expect(
      beamCandidates({
        tokenId: 7,
        logprob: -2,
        rank: 3,
        topLogprobs: [
          { tokenId: 1, logprob: -0.5 },
          { tokenId: 7, logprob: -2 },
          { tokenId: 4, logprob: -1 },
        ],
      }),
    ).toEqual([
      { tokenId: 7, logprob: -2 },
      { tokenId: 1, logprob: -0.5 },
      { tokenId: 4, logprob: -1 },
    ]);
  });
});
