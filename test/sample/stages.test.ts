/** One sampler stage at a time, on synthetic logits. */
import { describe, expect, it } from "vitest";
import { banBadWords } from "../../src/core/sample/ops/bad-words.ts";
import { applyPenalties, promptTokens } from "../../src/core/sample/ops/penalties.ts";
import { SequenceSampler } from "../../src/core/sample/sampler.ts";
import { greedy, params, randomRow, row } from "./helpers.ts";

function drawMany(
  sampler: SequenceSampler,
  logits: Float32Array,
  count: number,
  output: number[] = [],
): Set<number> {
  const seen = new Set<number>();
  for (let i = 0; i < count; i++) seen.add(sampler.sample(logits, output).tokenId);
  return seen;
}

describe("greedy (stage 7)", () => {
  it("takes the argmax, lowest id on ties", () => {
    const s = new SequenceSampler(greedy(), 5, []);
    expect(s.sample(row([1, 4, 2, 4, 0]), []).tokenId).toBe(1);
  });

  it("top_k=1 gives the greedy token", () => {
    const g = new SequenceSampler(greedy(), 1000, []);
    const k1 = new SequenceSampler(params({ topK: 1, temperature: 1.5 }), 1000, []);
    for (let i = 0; i < 50; i++) {
      const r = randomRow(1000, 100 + i);
      expect(k1.sample(r, []).tokenId).toBe(g.sample(r, []).tokenId);
    }
  });

  it("temperature 0 is greedy; (0, 0.01) is raised to 0.01 and still samples (vLLM)", () => {
    const tie = row([1, 1, -5]);
    expect(drawMany(new SequenceSampler(params({ temperature: 0 }), 3, []), tie, 100)).toEqual(new Set([0]));
    expect(drawMany(new SequenceSampler(params({ temperature: 1e-6 }), 3, []), tie, 100)).toEqual(
      new Set([0, 1]),
    );
  });
});

describe("allowed_token_ids and the structured-output mask (stages 0, 2)", () => {
  it("never leaves the allowed set, and greedy picks the best allowed", () => {
    const r = randomRow(500, 1, 1);
    const allowed = [3, 77, 250, 499];
    const s = new SequenceSampler(params({ allowedTokenIds: allowed }), 500, []);
    for (const id of drawMany(s, r, 300)) expect(allowed).toContain(id);
    const best = allowed.reduce((a, b) => (r[b] > r[a] ? b : a));
    expect(new SequenceSampler(greedy({ allowedTokenIds: allowed }), 500, []).sample(r, []).tokenId).toBe(
      best,
    );
  });

  it("applies the bitmask (bit i = token i allowed; tokens past the mask are not)", () => {
    const r = row(Array.from({ length: 40 }, (_, i) => i)); // higher ids are better
    const mask = new Uint32Array([(1 << 3) | (1 << 20)]); // 32 bits: tokens 32..39 not covered
    const s = new SequenceSampler(greedy(), 40, []);
    expect(s.sample(r, [], mask).tokenId).toBe(20);
    const random = new SequenceSampler(params(), 40, []);
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) seen.add(random.sample(new Float32Array(40), [], mask).tokenId);
    expect(seen).toEqual(new Set([3, 20]));
  });

  it("combines the mask with allowed_token_ids", () => {
    const r = row([5, 4, 3, 2, 1]);
    const mask = new Uint32Array([0b11110]);
    const s = new SequenceSampler(greedy({ allowedTokenIds: [0, 2, 3] }), 5, []);
    expect(s.sample(r, [], mask).tokenId).toBe(2);
  });
});

describe("bad words (stage 3)", () => {
  const ninf = Number.NEGATIVE_INFINITY;

  it("bans single-token words always", () => {
    const r = row([0, 0, 0, 0]);
    banBadWords(r, [[2]], []);
    expect(Array.from(r)).toEqual([0, 0, ninf, 0]);
  });

  it("bans a multi-token word's last token only when the output ends with the rest", () => {
    const words = [
      [3, 7],
      [1, 2, 9],
    ];
    const banned = (output: number[]) => {
      const r = new Float32Array(10);
      banBadWords(r, words, output);
      return Array.from(r.keys()).filter((i) => r[i] === ninf);
    };
    expect(banned([])).toEqual([]);
    expect(banned([3])).toEqual([7]);
    expect(banned([3, 4])).toEqual([]);
    expect(banned([5, 1, 2])).toEqual([9]);
    expect(banned([2])).toEqual([]);
    expect(banned([1, 2, 3])).toEqual([7]);
  });

  it("steers the sampler away from the banned continuation", () => {
    const r = row([0, 0, 0, 1, 0, 0, 0, 9, 0, 0]);
    const s = new SequenceSampler(greedy({ badWordsTokenIds: [[3, 7]] }), 10, []);
    expect(s.sample(r, [1]).tokenId).toBe(7);
    expect(s.sample(r, [3]).tokenId).toBe(3);
  });
});

describe("min_tokens (stage 4)", () => {
  const r = row([0, 1, 9, 3, 8, 2, 7]); // EOS 2 best, stop id 4 next, then 6
  for (const ignoreEos of [false, true]) {
    it(`masks EOS and stop ids until reached, then not (ignoreEos=${ignoreEos})`, () => {
      const s = new SequenceSampler(
        greedy({ eosTokenIds: [2], stopTokenIds: [4], minTokens: 3, ignoreEos }),
        7,
        [],
      );
      expect(s.sample(r, []).tokenId).toBe(6);
      expect(s.sample(r, [6, 6]).tokenId).toBe(6);
      expect(s.sample(r, [6, 6, 6]).tokenId).toBe(2);
    });
  }
});

describe("logit_bias (stage 5)", () => {
  it("+100 forces a token and -100 removes the favourite", () => {
    const r = randomRow(2000, 9, 2);
    const s = new SequenceSampler(params({ logitBias: { ids: [1234], biases: [100] } }), 2000, []);
    expect(drawMany(s, r, 100)).toEqual(new Set([1234]));
    const top = r.indexOf(Math.max(...r));
    const g = new SequenceSampler(greedy({ logitBias: { ids: [top], biases: [-100] } }), 2000, []);
    expect(g.sample(r, []).tokenId).not.toBe(top);
  });
});

describe("penalties (stage 6)", () => {
  it("repetition divides positive and multiplies negative logits of prompt and output tokens", () => {
    const r = row([2, -2, 3, -3, 4, 0]);
    const counts = new Int32Array(6);
    applyPenalties(r, promptTokens([0, 1, 0], 6), [2, 3, 2], counts, {
      repetition: 2,
      frequency: 0,
      presence: 0,
    });
    expect(Array.from(r)).toEqual([1, -4, 1.5, -6, 4, 0]);
    expect(counts.every((c) => c === 0)).toBe(true);
  });

  it("frequency counts output occurrences and presence applies once; the prompt is exempt from both", () => {
    const r = row([1, 1, 1, 1]);
    applyPenalties(r, promptTokens([], 4), [1, 2, 2, 2], new Int32Array(4), {
      repetition: 1,
      frequency: 0.5,
      presence: 0.25,
    });
    expect(Array.from(r)).toEqual([1, 1 - 0.5 - 0.25, 1 - 1.5 - 0.25, 1]);
  });

  it("applies repetition before frequency and presence, once per token", () => {
    const r = row([4, -1]);
    applyPenalties(r, promptTokens([0], 2), [0, 0, 1], new Int32Array(2), {
      repetition: 2,
      frequency: 1,
      presence: 0.5,
    });
    expect(r[0]).toBe(4 / 2 - 2 - 0.5);
    expect(r[1]).toBe(-1 * 2 - 1 - 0.5);
  });

  it("changes the sampler's choice; repetition covers the prompt, frequency only the output", () => {
    const r = row([5, 4.9, 0]);
    expect(new SequenceSampler(greedy({ repetitionPenalty: 1.1 }), 3, [0]).sample(r, []).tokenId).toBe(1);
    expect(new SequenceSampler(greedy({ frequencyPenalty: 1 }), 3, [0]).sample(r, []).tokenId).toBe(0);
    expect(new SequenceSampler(greedy({ frequencyPenalty: 0.05 }), 3, []).sample(r, [0, 0, 0]).tokenId).toBe(
      1,
    );
    expect(new SequenceSampler(greedy({ presencePenalty: 0.2 }), 3, []).sample(r, [0]).tokenId).toBe(1);
  });
});

describe("min_p (stage 9)", () => {
  it("drops tokens below min_p times the top probability", () => {
    // Probabilities proportional to 1, 0.5, 0.1, 0.05.
    const r = row([0, Math.log(0.5), Math.log(0.1), Math.log(0.05)]);
    const s = new SequenceSampler(params({ minP: 0.2 }), 4, []);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 6000; i++) counts[s.sample(r, []).tokenId]++;
    expect(counts[2] + counts[3]).toBe(0);
    expect(counts[0] / 6000).toBeCloseTo(2 / 3, 1);
  });

  it("applies after temperature", () => {
    // At temperature 0.5 token 1's relative probability is 0.25 < 0.3; at 1 it is 0.5.
    const r = row([0, Math.log(0.5)]);
    expect(drawMany(new SequenceSampler(params({ minP: 0.3, temperature: 0.5 }), 2, []), r, 300)).toEqual(
      new Set([0]),
    );
    expect(drawMany(new SequenceSampler(params({ minP: 0.3 }), 2, []), r, 300)).toEqual(new Set([0, 1]));
  });
});

describe("top_k (stage 10)", () => {
  it("keeps the k best and every token tied with the k-th", () => {
    const r = row([1, 5, 3, 3, 4, 0]);
    expect(drawMany(new SequenceSampler(params({ topK: 2 }), 6, []), r, 300)).toEqual(new Set([1, 4]));
    expect(drawMany(new SequenceSampler(params({ topK: 3 }), 6, []), r, 500)).toEqual(new Set([1, 4, 2, 3]));
  });
});

describe("top_p (stage 11)", () => {
  const flat = row([2, 2, 2, 2]);

  it("p = 1 keeps everything", () => {
    expect(drawMany(new SequenceSampler(params({ topP: 1 }), 4, []), flat, 300)).toEqual(
      new Set([0, 1, 2, 3]),
    );
  });

  it("a tiny p keeps only the argmax", () => {
    const r = randomRow(3000, 4, 1);
    const top = r.indexOf(Math.max(...r));
    expect(drawMany(new SequenceSampler(params({ topP: 1e-9 }), 3000, []), r, 100)).toEqual(new Set([top]));
  });

  it("ties at the boundary: lower ids rank first and exactly the needed mass stays", () => {
    // Four tokens of 0.25: cumulative ascending 0.25, 0.5, 0.75, 1; p = 0.5 drops those <= 0.5.
    expect(drawMany(new SequenceSampler(params({ topP: 0.5 }), 4, []), flat, 300)).toEqual(new Set([0, 1]));
    expect(drawMany(new SequenceSampler(params({ topP: 0.51 }), 4, []), flat, 300)).toEqual(
      new Set([0, 1, 2]),
    );
  });

  it("keeps the smallest top set whose mass reaches p", () => {
    // Probabilities 0.5, 0.3, 0.15, 0.05 (ids shuffled).
    const r = row([Math.log(0.15), Math.log(0.5), Math.log(0.05), Math.log(0.3)]);
    expect(drawMany(new SequenceSampler(params({ topP: 0.5 }), 4, []), r, 300)).toEqual(new Set([1]));
    expect(drawMany(new SequenceSampler(params({ topP: 0.79 }), 4, []), r, 300)).toEqual(new Set([1, 3]));
    expect(drawMany(new SequenceSampler(params({ topP: 0.81 }), 4, []), r, 500)).toEqual(new Set([1, 3, 0]));
  });
});

describe("edge cases", () => {
  it("leaves the caller's logits untouched", () => {
    const r = randomRow(100, 3);
    const copy = Float32Array.from(r);
    const s = new SequenceSampler(
      params({
        allowedTokenIds: [1, 2, 3],
        logitBias: { ids: [2], biases: [5] },
        repetitionPenalty: 1.3,
        minTokens: 2,
        eosTokenIds: [1],
        badWordsTokenIds: [[3]],
        logprobs: 5,
      }),
      100,
      [1, 2],
    );
    s.sample(r, [2], new Uint32Array(4).fill(0xffff));
    expect(r).toEqual(copy);
  });

  it("when every token is excluded, the structured-output mask wins: its best allowed token", () => {
    const r = row([1, 3, 2, 0]);
    // The mask allows 0 and 3, allowed_token_ids only 2: the mask's favourite, 0, never the model's 1.
    expect(
      new SequenceSampler(params({ allowedTokenIds: [2] }), 4, []).sample(r, [], new Uint32Array([0b1001]))
        .tokenId,
    ).toBe(0);
  });

  it("rejects out-of-range parameters and ids", () => {
    expect(() => new SequenceSampler(params({ topP: 0 }), 10, [])).toThrow(RangeError);
    expect(() => new SequenceSampler(params({ topK: -2 }), 10, [])).toThrow(RangeError);
    expect(() => new SequenceSampler(params({ repetitionPenalty: 0 }), 10, [])).toThrow(RangeError);
    expect(() => new SequenceSampler(params({ allowedTokenIds: [10] }), 10, [])).toThrow(RangeError);
    expect(() => new SequenceSampler(params({ logitBias: { ids: [-1], biases: [1] } }), 10, [])).toThrow(
      RangeError,
    );
    expect(() => new SequenceSampler(params(), 10, []).sample(new Float32Array(9), [])).toThrow(RangeError);
  });
});
