/**
 * The native kernels (native/) against the TypeScript ones they replace: the
 * same answers bit for bit (logSumExp within 1e-9 relative, the final log
 * being libm's rather than V8's), with the AVX2 and the scalar code of the
 * addon. Skipped when the addon is not built.
 */
import { afterAll, describe, expect, it } from "vitest";
import { addon, useNative } from "../../src/core/sample/native.ts";
import { Candidates, drawDense, topP, truncate } from "../../src/core/sample/ops/candidates.ts";
import { logSumExp, rankOf } from "../../src/core/sample/ops/logprobs.ts";
import { argmax, kthLargest, maxValue, topN } from "../../src/core/sample/ops/select.ts";
import type { SampledToken, SamplingParams } from "../../src/core/sample/params.ts";
import { SequenceSampler } from "../../src/core/sample/sampler.ts";
import { params, randomRow } from "./helpers.ts";

const NINF = Number.NEGATIVE_INFINITY;

/** f() with the TypeScript kernels, then with the native ones. */
function both<T>(f: () => T): [ts: T, native: T] {
  useNative(false);
  try {
    const ts = f();
    useNative(true);
    return [ts, f()];
  } finally {
    useNative(true);
  }
}

/** Uniform in [0, 1) from a small xorshift, independent of the code under test. */
function uniforms(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

/**
 * Rows that reach every branch: peaked and flat normals, ties (quantised
 * values), signed zeros, NaN, ±inf, masked (-inf) stretches, lengths that
 * leave tails for 4-, 8- and 64-wide loops.
 */
function rows(): { name: string; row: Float32Array }[] {
  const out: { name: string; row: Float32Array }[] = [];
  for (const [length, spread] of [
    [49_152, 3],
    [49_152, 1],
    [4099, 0.3],
    [3001, 5],
    [67, 2],
    [13, 1],
    [5, 1],
    [1, 1],
  ]) {
    out.push({ name: `normal ${length} x${spread}`, row: randomRow(length, length + spread * 1000, spread) });
  }
  const u = uniforms(99);
  const nasty = (length: number, f: (x: number, i: number) => number) =>
    Float32Array.from({ length }, (_, i) => f(u(), i));
  out.push({ name: "ties", row: nasty(5003, (x) => Math.floor(x * 12) / 4) });
  out.push({
    name: "zeros and specials",
    row: nasty(2051, (x) =>
      x < 0.05 ? Number.NaN : x < 0.3 ? NINF : x < 0.5 ? 0 : x < 0.7 ? -0 : Math.floor((x - 0.7) * 30) - 9,
    ),
  });
  out.push({ name: "negative zero max", row: nasty(1029, (x) => (x < 0.5 ? -0 : x < 0.6 ? 0 : -x * 5)) });
  out.push({ name: "masked", row: nasty(8197, (x, i) => (i % 37 === 0 || x < 0.1 ? x * 4 : NINF)) });
  out.push({ name: "one finite", row: nasty(300, (_, i) => (i === 211 ? 1.5 : NINF)) });
  out.push({ name: "all -inf", row: nasty(100, () => NINF) });
  out.push({ name: "with +inf", row: nasty(777, (x, i) => (i === 500 ? Number.POSITIVE_INFINITY : x)) });
  out.push({ name: "NaN only", row: nasty(40, () => Number.NaN) });
  return out;
}

const ROWS = rows();
const simdModes = addon?.simdAvailable ? [true, false] : [false];

describe.skipIf(addon === undefined)("native kernels", () => {
  afterAll(() => {
    addon?.setSimd(true);
    useNative(true);
  });

  for (const simd of simdModes) {
    describe(simd ? "AVX2" : "scalar", () => {
      const setup = () => expect(addon!.setSimd(simd)).toBe(simd);

      it("argmax, maxValue, rankOf: identical", () => {
        setup();
        for (const { name, row } of ROWS) {
          const [a, b] = both(() => [argmax(row), maxValue(row)]);
          expect(b[0], name).toBe(a[0]);
          expect(Object.is(a[1], b[1]), `${name}: max ${a[1]} vs ${b[1]}`).toBe(true);
          for (const id of [0, row.length >> 1, row.length - 1, Math.max(a[0], 0)]) {
            const [ra, rb] = both(() => rankOf(row, id));
            expect(rb, `${name} rank of ${id}`).toBe(ra);
          }
        }
      });

      it("topN: identical ids and values", () => {
        setup();
        for (const { name, row } of ROWS) {
          // The TypeScript insertion is quadratic in n: whole-row lists only for the small rows.
          const ns =
            row.length > 10_000 ? [0, 1, 5, 20, 64, 700] : [0, 1, 5, 20, 64, row.length, row.length + 3];
          for (const n of ns) {
            const [a, b] = both(() => {
              const ids = new Int32Array(n);
              const vals = new Float64Array(n);
              const count = topN(row, row.length, n, ids, vals);
              return {
                count,
                ids: Array.from(ids.subarray(0, count)),
                vals: Array.from(vals.subarray(0, count)),
              };
            });
            expect(b, `${name} n=${n}`).toEqual(a);
          }
        }
      });

      it("kthLargest: the same value", () => {
        setup();
        for (const { name, row } of ROWS) {
          const scratch = new Float64Array(row.length);
          for (const k of new Set([1, 2, 50, 513, row.length >> 1, row.length - 1, row.length])) {
            if (k < 1 || k > row.length) continue;
            const [a, b] = both(() => kthLargest(row, row.length, k, scratch));
            // Which zero comes out of a selection is unspecified; its value is not.
            expect(a === b || (Number.isNaN(a) && Number.isNaN(b)), `${name} k=${k}: ${a} vs ${b}`).toBe(
              true,
            );
          }
        }
      });

      it("logSumExp: within 1e-9 relative", () => {
        setup();
        for (const { name, row } of ROWS) {
          const [a, b] = both(() => logSumExp(row));
          if (!Number.isFinite(a)) expect(b, name).toBe(a);
          else expect(Math.abs(b - a), name).toBeLessThanOrEqual(1e-9 * Math.max(1, Math.abs(a)));
        }
      });

      it("truncate and top_p: identical candidates, weights, buckets and totals", () => {
        setup();
        const grid: [temperature: number, minP: number, topK: number, topP: number][] = [];
        for (const temperature of [0.3, 0.7, 1, 1.7])
          for (const minP of [0, 0.05, 0.4])
            for (const topK of [0, 1, 7, 50, 512, 513, 2000])
              for (const p of [1, 0.5, 0.9, 0.995]) grid.push([temperature, minP, topK, p]);
        for (const { name, row } of ROWS) {
          if (row.length < 2) continue;
          const c = new Candidates(row.length);
          // The full grid on the smaller rows, a slice of it on the full-size ones.
          const cases = row.length > 10_000 ? grid.filter((_, i) => i % 7 === 0) : grid;
          for (const [temperature, minP, topK, p] of cases) {
            const [a, b] = both(() => {
              let total = truncate(row, row.length, temperature, minP, topK, p, c);
              const gathered = {
                total,
                ids: Array.from(c.ids.subarray(0, c.count)),
                weights: Array.from(c.weights.subarray(0, c.count)),
                buckets: p < 1 ? Array.from(c.buckets.subarray(0, c.count)) : [],
              };
              if (p < 1) total = topP(c, p, total);
              return { gathered, kept: total, keptIds: Array.from(c.ids.subarray(0, c.count)) };
            });
            expect(b, `${name} T=${temperature} min_p=${minP} top_k=${topK} top_p=${p}`).toEqual(a);
          }
        }
      });

      it("drawDense: the same token for every uniform", () => {
        setup();
        const u = uniforms(7);
        for (const { name, row } of ROWS) {
          const c = new Candidates(row.length);
          for (const temperature of [0.2, 0.7, 1, 2.5]) {
            for (const x of [0, 0.5, 1 - 2 ** -53, u(), u(), u(), u(), u()]) {
              const [a, b] = both(() => drawDense(row, row.length, temperature, x, c));
              expect(b, `${name} T=${temperature} u=${x}`).toBe(a);
            }
          }
        }
      });

      it("seeded samplers: identical token streams, ranks and top logprobs", () => {
        setup();
        const vocab = 49_152;
        const stream = Array.from({ length: 24 }, (_, i) => randomRow(vocab, 500 + i, i % 3 === 0 ? 1 : 3));
        // Ties and a masked stretch in a few rows.
        for (let i = 0; i < vocab; i += 3) stream[5][i] = Math.round(stream[5][i]);
        stream[7].fill(NINF, 100, 30_000);
        const configs: Partial<SamplingParams>[] = [
          { temperature: 0 },
          { temperature: 0, logprobs: 20 },
          { temperature: 0.7 },
          { temperature: 1.3, logprobs: 5 },
          { temperature: 0.7, topK: 50 },
          { temperature: 0.7, topK: 1000 },
          { temperature: 0.7, topP: 0.9 },
          { temperature: 1, topP: 0.5, logprobs: 3 },
          { temperature: 0.7, minP: 0.05 },
          {
            temperature: 0.8,
            topP: 0.9,
            topK: 50,
            minP: 0.05,
            repetitionPenalty: 1.1,
            frequencyPenalty: 0.5,
            presencePenalty: 0.5,
            logprobs: 20,
          },
          { temperature: 0.9, allowedTokenIds: Array.from({ length: 3000 }, (_, i) => i * 7), logprobs: 2 },
          { temperature: 1, logitBias: { ids: [17], biases: [30] }, minTokens: 5, eosTokenIds: [2] },
        ];
        const prompt = Array.from({ length: 64 }, (_, i) => (i * 7919) % vocab);
        for (const config of configs) {
          const [a, b] = both(() => {
            const sampler = new SequenceSampler(params({ seed: 4242, ...config }), vocab, prompt);
            const output: number[] = [];
            const tokens: SampledToken[] = [];
            for (let step = 0; step < 60; step++) {
              const t = sampler.sample(stream[step % stream.length], output);
              output.push(t.tokenId);
              tokens.push(t);
            }
            return tokens;
          });
          const what = JSON.stringify(config, (_, v) => (v instanceof Map ? [...v] : v));
          expect(
            b.map((t) => t.tokenId),
            what,
          ).toEqual(a.map((t) => t.tokenId));
          for (let i = 0; i < a.length; i++) {
            expect(b[i].rank, what).toBe(a[i].rank);
            expect(
              b[i].topLogprobs?.map((t) => t.tokenId),
              what,
            ).toEqual(a[i].topLogprobs?.map((t) => t.tokenId));
            if (a[i].logprob !== undefined) expect(b[i].logprob!).toBeCloseTo(a[i].logprob!, 9);
          }
        }
      });
    });
  }

  it("checks its arguments instead of reading past an array", () => {
    const n = addon!;
    const row = new Float32Array(10);
    expect(() => n.argmax(row, 11)).toThrow(RangeError);
    expect(() => n.argmax(new Float64Array(10) as unknown as Float32Array, 10)).toThrow(TypeError);
    expect(() => n.topN(row, 10, 5, new Int32Array(4), new Float64Array(5))).toThrow(RangeError);
    expect(() => n.rankOf(row, 10, 10)).toThrow(RangeError);
    expect(() => n.kthLargest(row, 10, 0)).toThrow(RangeError);
    expect(() => n.drawDense(row, 10, 0, 0.5, new Float64Array(1))).toThrow(RangeError);
    expect(() => n.drawDense(row, 129, 1, 0.5, new Float64Array(3))).toThrow(RangeError);
    expect(() => n.massHistogram(row, 10, 0, 0, 1, new Float64Array(1024))).toThrow(RangeError);
  });

  it("is what the ops use unless switched off", () => {
    expect(useNative(false)).toBe(false);
    expect(useNative(true)).toBe(true);
  });
});
