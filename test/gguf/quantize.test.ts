import { describe, expect, it } from "vitest";
import { dequantize } from "../../src/models/gguf/dequantize.ts";
import {
  encodeBF16,
  encodeF16,
  encodeF32,
  quantize,
  quantizeQ4_0,
  quantizeQ4_1,
  quantizeQ8_0,
} from "../../src/models/gguf/quantize.ts";
import { GgmlType } from "../../src/models/gguf/types.ts";
import { prng } from "./helpers.ts";

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("hex");
}

describe("exact blocks (worked out by hand from quantize_row_*_ref)", () => {
  it("Q4_0: x = i-16; max |x| is -16 so d = 2, q = trunc(x/2 + 8.5) clamped to 15", () => {
    const x = Array.from({ length: 32 }, (_, i) => i - 16);
    // q_j = floor((j+1)/2): 0,1,1,2,...,8 for j < 16 and 8..15,15 (16 clamped) for j >= 16.
    expect(hex(quantizeQ4_0(x))).toBe(`0040${"8091 91a2 a2b3 b3c4 c4d5 d5e6 e6f7 f7f8".replaceAll(" ", "")}`);
  });

  it("Q4_0: an all-zero block has d = 0/-8 = -0 (fp16 0x8000) and every q = 8", () => {
    expect(hex(quantizeQ4_0(new Array(32).fill(0)))).toBe(`0080${"88".repeat(16)}`);
    expect(hex(quantizeQ8_0(new Array(32).fill(0)))).toBe("00".repeat(34));
  });

  it("Q4_1: x = (i%16)/2 - 2 gives d = 0.5, m = -2, q = i%16", () => {
    const x = Array.from({ length: 32 }, (_, i) => (i % 16) / 2 - 2);
    const nibbles = Array.from({ length: 16 }, (_, j) => (j * 0x11).toString(16).padStart(2, "0")).join("");
    expect(hex(quantizeQ4_1(x))).toBe(`0038${"00c0"}${nibbles}`);
  });

  it("Q8_0: amax 127 gives d = 1 and roundf sends halves away from zero", () => {
    const x = new Array(32).fill(0);
    x.splice(0, 8, -127, 0.5, -0.5, 1.5, -2.5, 2.49, -126.5, 3);
    const q = [-127, 1, -1, 2, -3, 2, -127, 3].map((v) => (v & 0xff).toString(16).padStart(2, "0")).join("");
    expect(hex(quantizeQ8_0(x))).toBe(`003c${q}${"00".repeat(24)}`);
  });

  it("F32/F16/BF16 encoders", () => {
    expect(hex(encodeF32([1, -2]))).toBe("0000803f000000c0");
    expect(hex(encodeF16([1, -2, 65504]))).toBe("003c00c0ff7b");
    // bf16 rounds to nearest even: 1 + 2^-8 is a tie (stays 1), 1 + 3*2^-8 rounds up.
    expect(hex(encodeBF16([1, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -3.140625]))).toBe("803f803f823f49c0");
  });

  it("rejects partial blocks and types without a quantizer", () => {
    expect(() => quantizeQ4_0(new Array(20).fill(1))).toThrow(/not a multiple of the block size 32/);
    expect(() => quantize(GgmlType.Q4_K, new Array(256).fill(1))).toThrow(/no quantizer for ggml type Q4_K/);
  });
});

describe("quantize -> dequantize stays within the format's error bound", () => {
  const next = prng(42);
  const n = 32 * 256;
  // Blocks of very different magnitudes, some with an offset so Q4_1/Q5_1's min matters.
  const x = Float32Array.from({ length: n }, (_, i) => {
    const block = i >> 5;
    return ((next() - 0.5) * 2 ** ((block % 12) - 6) + (block % 3 === 0 ? 2 ** ((block % 5) - 2) : 0)) * 1;
  });

  function blockStats(b: number): { amax: number; min: number; max: number } {
    let amax = 0;
    let min = Infinity;
    let max = -Infinity;
    for (let j = b * 32; j < b * 32 + 32; j++) {
      amax = Math.max(amax, Math.abs(x[j]!));
      min = Math.min(min, x[j]!);
      max = Math.max(max, x[j]!);
    }
    return { amax, min, max };
  }

  // Bound per block, with slack for the fp16 rounding of d (2^-11 relative) and of m.
  const cases: [string, number, (s: { amax: number; min: number; max: number }) => number][] = [
    ["Q8_0", GgmlType.Q8_0, (s) => (s.amax / 127) * 0.57],
    // The extreme opposite to the signed max lands on q = 16 and is clamped: error up to one step.
    ["Q4_0", GgmlType.Q4_0, (s) => (s.amax / 8) * 1.01],
    ["Q5_0", GgmlType.Q5_0, (s) => (s.amax / 16) * 1.02],
    ["Q4_1", GgmlType.Q4_1, (s) => ((s.max - s.min) / 15) * 0.51 + Math.abs(s.min) * 2 ** -10],
    ["Q5_1", GgmlType.Q5_1, (s) => ((s.max - s.min) / 31) * 0.52 + Math.abs(s.min) * 2 ** -10],
    ["F16", GgmlType.F16, (s) => s.amax * 2 ** -11],
    ["BF16", GgmlType.BF16, (s) => s.amax * 2 ** -8],
  ];
  it.each(cases)("%s", (_name, type, bound) => {
    const y = dequantize(type, quantize(type, x), n);
    let worst = 0;
    for (let b = 0; b < n / 32; b++) {
      const limit = bound(blockStats(b));
      for (let j = b * 32; j < b * 32 + 32; j++) worst = Math.max(worst, Math.abs(y[j]! - x[j]!) / limit);
    }
    expect(worst).toBeLessThanOrEqual(1);
    expect(worst).toBeGreaterThan(0.3); // the bound is not vacuous
  });

  it("F32 is lossless", () => {
    expect(dequantize(GgmlType.F32, encodeF32(x), n)).toEqual(x);
  });
});
