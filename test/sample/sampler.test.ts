/** Whole-sampler properties: logprobs, seeded streams, and the drawn distribution. */
import { describe, expect, it } from "vitest";
import { seedForChoice } from "../../src/core/sample/ops/rng.ts";
import { SequenceSampler } from "../../src/core/sample/sampler.ts";
import { greedy, logSoftmax, params, randomRow, row, tokenCounts } from "./helpers.ts";
import { referenceDistribution } from "./reference.ts";

describe("logprobs (stages 1 and 13)", () => {
  it("equal a float64 log_softmax of the raw logits, with correct ranks and sorted alternatives", () => {
    const vocab = 5000;
    const s = new SequenceSampler(params({ logprobs: 5, temperature: 0.8, topK: 20 }), vocab, []);
    for (let step = 0; step < 20; step++) {
      const r = randomRow(vocab, 50 + step, 2);
      const ref = logSoftmax(r);
      const out = s.sample(r, []);
      expect(out.logprob).toBeCloseTo(ref[out.tokenId], 8);
      expect(out.rank).toBe(ref.filter((lp) => lp >= ref[out.tokenId]).length);
      const expectedTop = Array.from(ref.keys())
        .sort((a, b) => ref[b] - ref[a])
        .slice(0, 5);
      expect(out.topLogprobs!.map((t) => t.tokenId)).toEqual(expectedTop);
      for (const t of out.topLogprobs!) expect(t.logprob).toBeCloseTo(ref[t.tokenId], 8);
    }
  });

  it("are raw: penalties, bias and temperature do not change them", () => {
    const r = randomRow(300, 8);
    const ref = logSoftmax(r);
    const s = new SequenceSampler(
      greedy({
        logprobs: 3,
        repetitionPenalty: 1.5,
        logitBias: { ids: [7], biases: [50] },
        frequencyPenalty: 1,
      }),
      300,
      [1, 2, 3],
    );
    const out = s.sample(r, [4, 4]);
    expect(out.tokenId).toBe(7);
    expect(out.logprob).toBeCloseTo(ref[7], 8);
    expect(out.rank).toBe(ref.filter((lp) => lp >= ref[7]).length);
  });

  it("see the structured-output mask, which vLLM applies before its sampler", () => {
    const r = row([0, 1, 2, 3]);
    const out = new SequenceSampler(greedy({ logprobs: 4 }), 4, []).sample(r, [], new Uint32Array([0b0011]));
    const ref = logSoftmax([0, 1]);
    expect(out.tokenId).toBe(1);
    expect(out.logprob).toBeCloseTo(ref[1], 10);
    expect(out.rank).toBe(1);
    expect(out.topLogprobs!.map((t) => [t.tokenId, t.logprob])).toEqual([
      [1, expect.closeTo(ref[1], 10)],
      [0, expect.closeTo(ref[0], 10)],
      [2, -9999],
      [3, -9999],
    ]);
  });

  it("floor -inf at -9999", () => {
    const ninf = Number.NEGATIVE_INFINITY;
    const out = new SequenceSampler(greedy({ logprobs: 3 }), 3, []).sample(row([0, ninf, ninf]), []);
    expect(out.logprob).toBe(0);
    expect(out.topLogprobs).toEqual([
      { tokenId: 0, logprob: 0 },
      { tokenId: 1, logprob: -9999 },
      { tokenId: 2, logprob: -9999 },
    ]);
  });

  it("logprobs = 0 gives the chosen token only; undefined gives nothing", () => {
    const r = row([1, 2, 3]);
    const zero = new SequenceSampler(greedy({ logprobs: 0 }), 3, []).sample(r, []);
    expect(zero.topLogprobs).toEqual([]);
    expect(zero.rank).toBe(1);
    expect(new SequenceSampler(greedy(), 3, []).sample(r, [])).toEqual({ tokenId: 2 });
  });

  it("gives tied tokens the worse rank", () => {
    const out = new SequenceSampler(greedy({ logprobs: 1 }), 4, []).sample(row([5, 5, 5, 1]), []);
    expect(out.tokenId).toBe(0);
    expect(out.rank).toBe(3);
  });
});

describe("seeded streams (stage 12)", () => {
  const vocab = 2000;
  const rows = Array.from({ length: 40 }, (_, i) => randomRow(vocab, 1000 + i, 1.5));
  const p = { temperature: 0.9, topP: 0.95, topK: 200 };
  const run = (sampler: SequenceSampler) => rows.map((r) => sampler.sample(r, []).tokenId);

  it("repeat for the same seed and differ for another", () => {
    const a = run(new SequenceSampler(params({ ...p, seed: 11 }), vocab, []));
    expect(run(new SequenceSampler(params({ ...p, seed: 11 }), vocab, []))).toEqual(a);
    expect(run(new SequenceSampler(params({ ...p, seed: 12n }), vocab, []))).not.toEqual(a);
  });

  it("do not depend on other samplers interleaved on the same thread", () => {
    const alone = run(new SequenceSampler(params({ ...p, seed: 3 }), vocab, []));
    const a = new SequenceSampler(params({ ...p, seed: 3 }), vocab, []);
    const b = new SequenceSampler(
      params({ ...p, seed: 4, repetitionPenalty: 1.2, logprobs: 3 }),
      vocab,
      [5, 6],
    );
    const other = new SequenceSampler(params({ temperature: 1, seed: 9 }), 300, []);
    const interleaved = rows.map((r, i) => {
      b.sample(rows[(i + 7) % rows.length], [1, 2, 3]);
      other.sample(randomRow(300, i), []);
      return a.sample(r, []).tokenId;
    });
    expect(interleaved).toEqual(alone);
  });

  it("give n > 1 choices distinct but reproducible streams through seedForChoice", () => {
    const choice = (i: number) =>
      run(new SequenceSampler(params({ ...p, seed: seedForChoice(77, i) }), vocab, []));
    expect(choice(1)).toEqual(choice(1));
    expect(choice(1)).not.toEqual(choice(0));
  });

  it("consume one uniform per step whatever the filters keep", () => {
    // Step 0: one sampler is masked down to a single token, the other draws among ten. Step 1 must agree.
    const flat = new Float32Array(10);
    const narrow = new SequenceSampler(params({ seed: 5 }), 10, []);
    const wide = new SequenceSampler(params({ seed: 5 }), 10, []);
    expect(narrow.sample(flat, [], new Uint32Array([1])).tokenId).toBe(0);
    wide.sample(flat, []);
    for (let i = 0; i < 5; i++) expect(narrow.sample(flat, []).tokenId).toBe(wide.sample(flat, []).tokenId);
  });
});

describe("drawn distribution", () => {
  it("matches the filtered distribution (temperature 0.7 + top_k + top_p + min_p) over 20k draws", () => {
    const vocab = 64;
    const r = randomRow(vocab, 2024, 1.2);
    const f = { temperature: 0.7, topK: 12, topP: 0.85, minP: 0.02 };
    const expected = referenceDistribution(r, f);
    const s = new SequenceSampler(params({ ...f, seed: 99 }), vocab, []);
    const draws = 20_000;
    const counts = tokenCounts(
      Array.from({ length: draws }, () => s.sample(r, []).tokenId),
      vocab,
    );
    let chi2 = 0;
    let support = 0;
    for (let i = 0; i < vocab; i++) {
      if (expected[i] === 0) {
        expect(counts[i], `token ${i} is filtered out`).toBe(0);
        continue;
      }
      support++;
      const e = expected[i] * draws;
      chi2 += (counts[i] - e) ** 2 / e;
      expect(Math.abs(counts[i] / draws - expected[i])).toBeLessThan(
        5 * Math.sqrt((expected[i] * (1 - expected[i])) / draws),
      );
    }
    expect(support).toBeGreaterThan(3);
    // Chi-square with support-1 degrees of freedom: far below the 0.1% tail for these sizes.
    expect(chi2).toBeLessThan(3 * support + 10);
  });

  it("plain temperature sampling follows softmax(logits / T)", () => {
    const r = row([0, 1, 2, -1, 0.5]);
    const expected = referenceDistribution(r, { temperature: 1.5, minP: 0, topK: 0, topP: 1 });
    const s = new SequenceSampler(params({ temperature: 1.5, seed: 1 }), 5, []);
    const draws = 20_000;
    const counts = tokenCounts(
      Array.from({ length: draws }, () => s.sample(r, []).tokenId),
      5,
    );
    for (const [i, c] of counts.entries()) expect(Math.abs(c / draws - expected[i])).toBeLessThan(0.015);
  });
});
