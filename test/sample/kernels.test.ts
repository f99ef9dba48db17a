import { describe, expect, it } from "vitest";
import { Candidates, draw, drawDense, topP, truncate } from "../../src/core/sample/ops/candidates.ts";
import { expNonPositive } from "../../src/core/sample/ops/exp.ts";
import { logSumExp, rankOf } from "../../src/core/sample/ops/logprobs.ts";
import { argmax, kthLargest, massBoundary, maxValue, topN } from "../../src/core/sample/ops/select.ts";
import { randomRow, row } from "./helpers.ts";
import { referenceDistribution } from "./reference.ts";

describe("argmax / maxValue", () => {
  it("returns the lowest index among equal maxima in every lane position", () => {
    for (let len = 1; len <= 11; len++) {
      for (let a = 0; a < len; a++) {
        for (let b = a; b < len; b++) {
          const r = new Float32Array(len);
          r[a] = 5;
          r[b] = 5;
          expect(argmax(r)).toBe(a);
          expect(maxValue(r)).toBe(5);
        }
      }
    }
  });

  it("ignores NaN and reports -1 when nothing beats -inf", () => {
    expect(argmax(row([Number.NaN, -1, -5, Number.NaN, 0.5]))).toBe(4);
    expect(argmax(row([Number.NEGATIVE_INFINITY, Number.NEGATIVE_INFINITY]))).toBe(-1);
    expect(maxValue(row([Number.NaN, Number.NEGATIVE_INFINITY]))).toBe(Number.NEGATIVE_INFINITY);
  });
});

describe("kthLargest", () => {
  const sortedDesc = (r: Float32Array) => Array.from(r).sort((a, b) => b - a);

  it("agrees with a sort for every k", () => {
    const r = randomRow(5000, 3);
    const sorted = sortedDesc(r);
    const scratch = new Float64Array(5000);
    for (const k of [1, 2, 50, 511, 512, 513, 1000, 4999, 5000])
      expect(kthLargest(r, 5000, k, scratch)).toBe(sorted[k - 1]);
  });

  it("handles heavy ties and NaN (as -inf)", () => {
    const r = Float32Array.from({ length: 2000 }, (_, i) => (i % 7 === 0 ? Number.NaN : i % 5));
    const clean = Float32Array.from(r, (v) => (Number.isNaN(v) ? Number.NEGATIVE_INFINITY : v));
    const sorted = sortedDesc(clean);
    const scratch = new Float64Array(2000);
    for (const k of [1, 100, 600, 1000, 1999]) expect(kthLargest(r, 2000, k, scratch)).toBe(sorted[k - 1]);
  });
});

describe("massBoundary", () => {
  it("finds the smallest value whose descending prefix reaches the mass", () => {
    const values = Float64Array.from(randomRow(3000, 11), (v) => Math.exp(v));
    const sorted = Array.from(values).sort((a, b) => b - a);
    const total = sorted.reduce((a, b) => a + b, 0);
    for (const p of [1e-9, 0.1, 0.5, 0.9, 0.999]) {
      let acc = 0;
      let expected = sorted[sorted.length - 1];
      for (const v of sorted) {
        acc += v;
        if (acc >= p * total) {
          expected = v;
          break;
        }
      }
      expect(massBoundary(Float64Array.from(values), values.length, p * total)).toBe(expected);
    }
  });
});

describe("topN", () => {
  it("lists the largest values in descending order, lower index first on ties", () => {
    const r = row([1, 5, 3, 5, Number.NaN, 2, 5, -1]);
    const ids = new Int32Array(4);
    const vals = new Float64Array(4);
    expect(topN(r, r.length, 4, ids, vals)).toBe(4);
    expect(Array.from(ids)).toEqual([1, 3, 6, 2]);
    expect(Array.from(vals)).toEqual([5, 5, 5, 3]);
  });

  it("agrees with a sort on random data", () => {
    const r = randomRow(10_000, 5);
    const ids = new Int32Array(20);
    const vals = new Float64Array(20);
    topN(r, r.length, 20, ids, vals);
    const expected = Array.from(r.keys())
      .sort((a, b) => r[b] - r[a] || a - b)
      .slice(0, 20);
    expect(Array.from(ids)).toEqual(expected);
  });
});

describe("expNonPositive / logSumExp / rankOf", () => {
  it("matches Math.exp to 1e-10 relative on [-100, 0]", () => {
    for (let x = -100; x <= 0; x += 0.0123)
      expect(Math.abs(expNonPositive(x) / Math.exp(x) - 1)).toBeLessThan(1e-10);
    expect(expNonPositive(0)).toBe(1);
    expect(expNonPositive(Number.NEGATIVE_INFINITY)).toBe(0);
    expect(expNonPositive(-200)).toBe(0);
  });

  it("logSumExp equals the float64 reference", () => {
    const r = randomRow(49_152, 2);
    let max = Number.NEGATIVE_INFINITY;
    for (const v of r) max = Math.max(max, v);
    let sum = 0;
    for (const v of r) sum += Math.exp(v - max);
    expect(logSumExp(r)).toBeCloseTo(max + Math.log(sum), 9);
    expect(logSumExp(row([Number.NEGATIVE_INFINITY, Number.NEGATIVE_INFINITY]))).toBe(
      Number.NEGATIVE_INFINITY,
    );
  });

  it("ranks count every entry >= the token's, itself included", () => {
    const r = row([3, 1, 3, 2, 0]);
    expect(rankOf(r, 0)).toBe(2);
    expect(rankOf(r, 2)).toBe(2);
    expect(rankOf(r, 3)).toBe(3);
    expect(rankOf(r, 4)).toBe(5);
  });
});

describe("min_p / top_k / top_p kernels against a literal transcription of vLLM", () => {
  function kept(r: Float32Array, temperature: number, minP: number, k: number, p: number) {
    const c = new Candidates(r.length);
    let total = truncate(r, r.length, temperature, minP, k, p, c);
    if (p < 1) total = topP(c, p, total);
    const probs = new Array<number>(r.length).fill(0);
    for (let j = 0; j < c.count; j++) probs[c.ids[j]] = c.weights[j] / total;
    return probs;
  }

  const cases = [
    { temperature: 1, minP: 0, topK: 0, topP: 0.9 },
    { temperature: 0.7, minP: 0, topK: 40, topP: 1 },
    { temperature: 0.7, minP: 0.05, topK: 0, topP: 1 },
    { temperature: 0.7, minP: 0.02, topK: 100, topP: 0.8 },
    { temperature: 1.3, minP: 0, topK: 700, topP: 0.95 },
    { temperature: 0.5, minP: 0.3, topK: 3, topP: 0.5 },
  ];
  for (const [n, spread] of [
    [1000, 1],
    [4000, 3],
  ]) {
    for (const f of cases) {
      it(`keeps the same tokens with the same probabilities (vocab ${n}, spread ${spread}, ${JSON.stringify(f)})`, () => {
        const r = randomRow(n, n + spread, spread);
        const got = kept(r, f.temperature, f.minP, f.topK, f.topP);
        const want = referenceDistribution(r, f);
        for (let i = 0; i < n; i++) {
          expect(got[i] > 0, `token ${i}`).toBe(want[i] > 0);
          expect(got[i]).toBeCloseTo(want[i], 9);
        }
      });
    }
  }

  it("keeps every token tied with the k-th, including ones the heap evicted or never took", () => {
    const ids = (r: number[], k: number) => {
      const probs = kept(row(r), 1, 0, k, 1);
      return Array.from(probs.keys()).filter((i) => probs[i] > 0);
    };
    expect(ids([3, 3, 5], 2)).toEqual([0, 1, 2]);
    expect(ids([5, 3, 4, 3, 1], 3)).toEqual([0, 1, 2, 3]);
    expect(ids([1, 2, 3, 4, 5, 6], 3)).toEqual([3, 4, 5]);
    expect(ids([Number.NaN, 2, Number.NEGATIVE_INFINITY, 1], 2)).toEqual([1, 3]);
    expect(ids([Number.NaN, Number.NEGATIVE_INFINITY, 1, Number.NEGATIVE_INFINITY], 3)).toEqual([2]);
  });

  // p values stay off exact multiples of the tie mass: there, float cumsum rounding decides either way.
  it("agrees on rows full of ties", () => {
    const r = Float32Array.from({ length: 600 }, (_, i) => (i * 7) % 6);
    for (const f of [
      { temperature: 1, minP: 0, topK: 150, topP: 1 },
      { temperature: 1, minP: 0, topK: 0, topP: 0.55 },
      { temperature: 0.8, minP: 0.5, topK: 0, topP: 0.705 },
      { temperature: 1, minP: 0, topK: 250, topP: 0.3 },
    ]) {
      const got = kept(r, f.temperature, f.minP, f.topK, f.topP);
      const want = referenceDistribution(r, f);
      for (let i = 0; i < r.length; i++) expect(got[i]).toBeCloseTo(want[i], 9);
    }
  });
});

describe("drawDense", () => {
  it("draws the same token as gathering every candidate and walking them", () => {
    const r = randomRow(3001, 77, 2);
    r[5] = Number.NEGATIVE_INFINITY;
    const c = new Candidates(r.length);
    for (let i = 0; i < 300; i++) {
      const u = (i + 0.5) / 300;
      const total = truncate(r, r.length, 0.9, 0, 0, 1, c);
      expect(drawDense(r, r.length, 0.9, u, new Candidates(r.length))).toBe(draw(c, total, u));
    }
  });

  it("never returns a -inf token and reports -1 when nothing is finite", () => {
    const ninf = Number.NEGATIVE_INFINITY;
    const c = new Candidates(200);
    const r = new Float32Array(200).fill(ninf);
    expect(drawDense(r, 200, 1, 0.5, c)).toBe(-1);
    r[130] = 0;
    for (const u of [0, 0.5, 0.999999]) expect(drawDense(r, 200, 1, u, c)).toBe(130);
  });
});
