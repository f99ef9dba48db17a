import { describe, expect, it } from "vitest";
import {
  concatNBits,
  type NBitsWeight,
  offsetMatrix,
  packNBits as packWithReport,
  quantize8,
  unpermuteLlamaRows,
  withBlockSumRows,
} from "../../src/models/convert/quantized-weights.ts";
import { dequantize } from "../../src/models/gguf/dequantize.ts";
import { quantize } from "../../src/models/gguf/quantize.ts";
import { GgmlType, type GgmlTypeId } from "../../src/models/gguf/types.ts";
import { seededRandom } from "../fixtures/synthetic-model.ts";

/** What MatMulNBits computes for weight element (row, col): scale * (q - 2^(bits-1)) + offset. */
function nbitsValue(w: NBitsWeight, row: number, col: number): number {
  const blocks = w.k / w.blockSize;
  const b = row * blocks + Math.floor(col / w.blockSize);
  const j = col % w.blockSize;
  let q: number;
  if (w.bits === 8) q = w.data[b * w.blockSize + j]! - 128;
  else {
    const byte = w.data[b * (w.blockSize / 2) + (j >> 1)]!;
    q = (j & 1 ? byte >> 4 : byte & 15) - 8;
  }
  return w.scales[b]! * q + (w.offsets ? w.offsets[b]! : 0);
}

/** The packed weight, requantizing where there is no exact mapping. */
function packNBits(
  type: GgmlTypeId,
  bytes: Uint8Array,
  n: number,
  k: number,
  dequantized: () => Float32Array,
): NBitsWeight {
  return packWithReport(type, bytes, n, k, dequantized, { name: "w", allowRequantize: true }).weight;
}

function randomRows(n: number, k: number, seed: number): Float32Array {
  const r = seededRandom(seed);
  return Float32Array.from({ length: n * k }, () => r() * 2 + 0.3);
}

describe("GGUF blocks → MatMulNBits", () => {
  const n = 6;
  const k = 96;
  for (const [name, type] of [
    ["Q4_0", GgmlType.Q4_0],
    ["Q4_1", GgmlType.Q4_1],
    ["Q8_0", GgmlType.Q8_0],
    ["Q5_0", GgmlType.Q5_0],
    ["Q5_1", GgmlType.Q5_1],
    ["F16 (requantized)", GgmlType.F16],
  ] as [string, GgmlTypeId][]) {
    it(`${name} reproduces llama.cpp's dequantized values`, () => {
      const bytes = quantize(type, randomRows(n, k, 7));
      const expected = dequantize(type, bytes, n * k);
      const w = packNBits(type, bytes, n, k, () => expected);
      const exact = type !== GgmlType.F16;
      for (let r = 0; r < n; r++)
        for (let c = 0; c < k; c++) {
          const got = nbitsValue(w, r, c);
          const want = expected[r * k + c]!;
          if (exact) expect(Math.abs(got - want)).toBeLessThan(1e-6 * Math.max(1, Math.abs(want)));
          else expect(Math.abs(got - want)).toBeLessThan(0.02);
        }
    });
  }

  it("concatenation keeps every row's values, widening 4-bit parts next to 8-bit ones", () => {
    const a = quantize(GgmlType.Q4_1, randomRows(2, 64, 1));
    const b = quantize(GgmlType.Q8_0, randomRows(3, 64, 2));
    const wa = packNBits(GgmlType.Q4_1, a, 2, 64, () => new Float32Array());
    const wb = packNBits(GgmlType.Q8_0, b, 3, 64, () => new Float32Array());
    const both = concatNBits([wa, wb]);
    expect(both.bits).toBe(8);
    expect(both.n).toBe(5);
    for (let c = 0; c < 64; c++) {
      for (let r = 0; r < 2; r++) expect(nbitsValue(both, r, c)).toBeCloseTo(nbitsValue(wa, r, c), 6);
      for (let r = 0; r < 3; r++) expect(nbitsValue(both, 2 + r, c)).toBeCloseTo(nbitsValue(wb, r, c), 6);
    }
  });

  it("the offset matrix is the transpose of the per-row block offsets", () => {
    const w = packNBits(
      GgmlType.Q4_1,
      quantize(GgmlType.Q4_1, randomRows(3, 64, 3)),
      3,
      64,
      () => new Float32Array(),
    );
    const c = offsetMatrix(w);
    for (let r = 0; r < 3; r++) for (let b = 0; b < 2; b++) expect(c[b * 3 + r]).toBe(w.offsets![r * 2 + b]);
  });

  it("block-sum rows follow the weight rows unchanged and select one input block each", () => {
    const a = quantize(GgmlType.Q4_1, randomRows(2, 96, 5));
    const q4 = packNBits(GgmlType.Q4_1, a, 2, 96, () => new Float32Array());
    const q8 = concatNBits([
      q4,
      packNBits(
        GgmlType.Q8_0,
        quantize(GgmlType.Q8_0, randomRows(1, 96, 6)),
        1,
        96,
        () => new Float32Array(),
      ),
    ]);
    for (const w of [q4, q8]) {
      const plain = { ...w, offsets: undefined };
      const ext = withBlockSumRows(w);
      expect(ext.n).toBe(w.n + 3);
      expect(ext.offsets).toBeUndefined();
      for (let c = 0; c < 96; c++) {
        for (let r = 0; r < w.n; r++) expect(nbitsValue(ext, r, c)).toBe(nbitsValue(plain, r, c));
        for (let b = 0; b < 3; b++)
          expect(nbitsValue(ext, w.n + b, c)).toBe(Math.floor(c / 32) === b ? 1 : 0);
      }
    }
  });

  it("symmetric 8-bit requantization stays within half a step", () => {
    const values = randomRows(2, 64, 4);
    const w = quantize8(values, 2, 64);
    for (let r = 0; r < 2; r++)
      for (let c = 0; c < 64; c++) {
        const step = w.scales[r * 2 + Math.floor(c / 32)]!;
        expect(Math.abs(nbitsValue(w, r, c) - values[r * 64 + c]!)).toBeLessThanOrEqual(step / 2 + 1e-7);
      }
  });
});

describe("llama Q/K row permutation", () => {
  it("moves GGUF row h*hd + 2i + j back to Hugging Face row h*hd + j*hd/2 + i", () => {
    const heads = 2;
    const hd = 8;
    const rows = heads * hd;
    const bytes = Uint8Array.from({ length: rows * 3 }, (_, i) => Math.floor(i / 3));
    const out = unpermuteLlamaRows(bytes, rows, heads);
    for (let h = 0; h < heads; h++)
      for (let j = 0; j < 2; j++)
        for (let i = 0; i < hd / 2; i++) {
          const hfRow = h * hd + j * (hd / 2) + i;
          expect(Array.from(out.subarray(hfRow * 3, hfRow * 3 + 3))).toEqual(
            Array(3).fill(h * hd + 2 * i + j),
          );
        }
  });
});
