/**
 * Dequantization against blocks assembled byte by byte here. Expected values come from the format's
 * formulas evaluated per element in the test, and the fingerprints at the end from gguf-py's
 * reference `quants.dequantize` run on the same pseudo-random blocks.
 */
import { describe, expect, it } from "vitest";
import { dequantize } from "../../src/models/gguf/dequantize.ts";
import { GgmlType } from "../../src/models/gguf/types.ts";
import { fnv1a, prng, putHalf, putU32, randomBlocks } from "./helpers.ts";

const f = Math.fround;

/** Small integers 0..n-1 from a seeded generator. */
function ints(count: number, n: number, seed: number): number[] {
  const next = prng(seed);
  return Array.from({ length: count }, () => Math.floor(next() * n));
}

function expectExactly(actual: Float32Array, expected: number[]): void {
  expect(actual.length).toBe(expected.length);
  expect(Array.from(actual)).toEqual(expected.map(f));
}

describe("plain types", () => {
  it("F32 copies little-endian floats", () => {
    const bytes = new Uint8Array(12);
    const dv = new DataView(bytes.buffer);
    [1.5, -2.25, 3e-8].forEach((v, i) => {
      dv.setFloat32(4 * i, v, true);
    });
    expectExactly(dequantize(GgmlType.F32, bytes, 3), [1.5, -2.25, 3e-8]);
  });

  it("F16 decodes normals, subnormals, zero signs and infinities", () => {
    const bits = [0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00, 0xfc00, 0x3555];
    const bytes = new Uint8Array(bits.length * 2);
    bits.forEach((h, i) => {
      bytes[2 * i] = h & 0xff;
      bytes[2 * i + 1] = h >> 8;
    });
    const y = dequantize(GgmlType.F16, bytes, bits.length);
    expect(Array.from(y)).toEqual([1, -2, 65504, 2 ** -24, -0, Infinity, -Infinity, 0x555 * 2 ** -12]);
    expect(Object.is(y[4], -0)).toBe(true);
  });

  it("BF16 is the high half of a binary32", () => {
    const bytes = new Uint8Array([0x80, 0x3f, 0xc0, 0xbf, 0x49, 0x40]); // 1, -1.5, 0x4049 = 3.140625
    expectExactly(dequantize(GgmlType.BF16, bytes, 3), [1, -1.5, 3.140625]);
  });

  it("F64 and integer types convert", () => {
    const b64 = new Uint8Array(16);
    new DataView(b64.buffer).setFloat64(0, 0.1, true);
    new DataView(b64.buffer).setFloat64(8, -7, true);
    expectExactly(dequantize(GgmlType.F64, b64, 2), [0.1, -7]);
    expectExactly(dequantize(GgmlType.I8, new Uint8Array([0x7f, 0x80, 0xff]), 3), [127, -128, -1]);
    expectExactly(dequantize(GgmlType.I16, new Uint8Array([0x00, 0x80, 0x34, 0x12]), 2), [-32768, 0x1234]);
    expectExactly(dequantize(GgmlType.I32, new Uint8Array([0xff, 0xff, 0xff, 0xff]), 1), [-1]);
    const i64 = new Uint8Array(8);
    new DataView(i64.buffer).setBigInt64(0, -5n, true);
    expectExactly(dequantize(GgmlType.I64, i64, 1), [-5]);
  });

  it("handles unaligned views", () => {
    const raw = new Uint8Array(9);
    new DataView(raw.buffer).setInt32(1, -123456, true);
    new DataView(raw.buffer).setInt32(5, 99, true);
    expectExactly(dequantize(GgmlType.I32, raw.subarray(1), 2), [-123456, 99]);
  });
});

describe("32-element blocks", () => {
  it("Q4_0: d=0.5, x = d*(q-8), byte j holds elements j and j+16", () => {
    const q = ints(32, 16, 1);
    const block = new Uint8Array(18);
    putHalf(block, 0, "0.5");
    for (let j = 0; j < 16; j++) block[2 + j] = q[j]! | (q[j + 16]! << 4);
    expectExactly(
      dequantize(GgmlType.Q4_0, block, 32),
      q.map((v) => 0.5 * (v - 8)),
    );
  });

  it("Q4_1: d=0.5, m=-1, nibbles 0..15", () => {
    const q = Array.from({ length: 32 }, (_, i) => (i * 7) % 16);
    const block = new Uint8Array(20);
    putHalf(block, 0, "0.5");
    putHalf(block, 2, "-1");
    for (let j = 0; j < 16; j++) block[4 + j] = q[j]! | (q[j + 16]! << 4);
    expectExactly(
      dequantize(GgmlType.Q4_1, block, 32),
      q.map((v) => 0.5 * v - 1),
    );
  });

  it("Q5_0: the 5th bit of element i is bit i of qh", () => {
    const q = ints(32, 32, 2);
    q[31] = 31; // make sure the top bit of qh is exercised
    const block = new Uint8Array(22);
    putHalf(block, 0, "0.25");
    let qh = 0;
    q.forEach((v, i) => {
      if (v >= 16) qh |= 1 << i;
    });
    putU32(block, 2, qh);
    for (let j = 0; j < 16; j++) block[6 + j] = (q[j]! & 15) | ((q[j + 16]! & 15) << 4);
    expectExactly(
      dequantize(GgmlType.Q5_0, block, 32),
      q.map((v) => 0.25 * (v - 16)),
    );
  });

  it("Q5_1: x = d*q + m with the high bits in qh", () => {
    const q = Array.from({ length: 32 }, (_, i) => 31 - i);
    const block = new Uint8Array(24);
    putHalf(block, 0, "0.5");
    putHalf(block, 2, "-2");
    let qh = 0;
    q.forEach((v, i) => {
      qh |= (v >> 4) << i;
    });
    putU32(block, 4, qh);
    for (let j = 0; j < 16; j++) block[8 + j] = (q[j]! & 15) | ((q[j + 16]! & 15) << 4);
    expectExactly(
      dequantize(GgmlType.Q5_1, block, 32),
      q.map((v) => 0.5 * v - 2),
    );
  });

  it("Q8_0: signed bytes times d, over several blocks", () => {
    const blocks = new Uint8Array(68);
    const expected: number[] = [];
    putHalf(blocks, 0, "0.25");
    putHalf(blocks, 34, "-2");
    for (let j = 0; j < 32; j++) {
      blocks[2 + j] = (j * 8) & 0xff; // 0, 8, ... 120, -128, ... -8 as int8
      blocks[36 + j] = j;
    }
    for (let j = 0; j < 32; j++) expected.push(0.25 * (((j * 8) << 24) >> 24));
    for (let j = 0; j < 32; j++) expected.push(-2 * j);
    expectExactly(dequantize(GgmlType.Q8_0, blocks, 64), expected);
  });
});

/** Packs 8 six-bit (scale, min) pairs the way Q4_K/Q5_K store them (the inverse of get_scale_min_k4). */
function packScaleMin(sc: number[], m: number[]): number[] {
  const b = new Array<number>(12).fill(0);
  for (let j = 0; j < 4; j++) {
    b[j] = sc[j]! | ((sc[j + 4]! >> 4) << 6);
    b[j + 4] = m[j]! | ((m[j + 4]! >> 4) << 6);
    b[j + 8] = (sc[j + 4]! & 15) | ((m[j + 4]! & 15) << 4);
  }
  return b;
}

describe("256-element super-blocks", () => {
  // Sub-blocks 4..7 get scales and mins >= 16 so their high bits, stored apart, matter.
  const sc = [1, 63, 7, 30, 17, 42, 63, 33];
  const mn = [0, 5, 63, 12, 48, 31, 16, 60];

  it("Q4_K: 6-bit scales/mins (incl. the j>=4 packing), chunk c = sub-blocks 2c and 2c+1", () => {
    const q = ints(256, 16, 3);
    const block = new Uint8Array(144);
    putHalf(block, 0, "0.5");
    putHalf(block, 2, "0.25");
    block.set(packScaleMin(sc, mn), 4);
    for (let i = 0; i < 256; i++) {
      const sub = i >> 5;
      const byte = 16 + (sub >> 1) * 32 + (i & 31);
      block[byte]! |= sub & 1 ? q[i]! << 4 : q[i]!;
    }
    const expected = q.map((v, i) => 0.5 * sc[i >> 5]! * v - 0.25 * mn[i >> 5]!);
    expectExactly(dequantize(GgmlType.Q4_K, block, 256), expected);
  });

  it("Q5_K: bit k of qh[l] is the 5th bit of element l of sub-block k", () => {
    const q = ints(256, 32, 4);
    const block = new Uint8Array(176);
    putHalf(block, 0, "0.125");
    putHalf(block, 2, "1");
    block.set(packScaleMin(sc, mn), 4);
    for (let i = 0; i < 256; i++) {
      const sub = i >> 5;
      const l = i & 31;
      block[16 + l]! |= (q[i]! >> 4) << sub;
      block[48 + (sub >> 1) * 32 + l]! |= sub & 1 ? (q[i]! & 15) << 4 : q[i]! & 15;
    }
    const expected = q.map((v, i) => f(0.125 * sc[i >> 5]! * v - mn[i >> 5]!));
    expectExactly(dequantize(GgmlType.Q5_K, block, 256), expected);
  });

  it("Q6_K: ql/qh element order, signed 8-bit scales, d at the end", () => {
    const q = ints(256, 64, 5);
    const scales = Array.from({ length: 16 }, (_, k) => (k % 2 ? -1 : 1) * (k * 8 + 7)); // up to -127
    const block = new Uint8Array(210);
    for (let i = 0; i < 256; i++) {
      const half = i >> 7;
      const r = i & 127;
      const k = r >> 5; // which quarter of the 128 elements
      const l = r & 31;
      const qlByte = half * 64 + l + (k & 1) * 32;
      block[qlByte]! |= k < 2 ? q[i]! & 15 : (q[i]! & 15) << 4;
      block[128 + half * 32 + l]! |= (q[i]! >> 4) << (2 * k);
    }
    scales.forEach((s, k) => {
      block[192 + k] = s & 0xff;
    });
    putHalf(block, 208, "0.75");
    const expected = q.map((v, i) => 0.75 * scales[i >> 4]! * (v - 32));
    expectExactly(dequantize(GgmlType.Q6_K, block, 256), expected);
  });

  it("Q2_K: 2-bit fields, 16 groups with a 4-bit scale and 4-bit min each", () => {
    const q = ints(256, 4, 6);
    const scaleOf = (g: number) => (g * 5) % 16;
    const minOf = (g: number) => 15 - g;
    const block = new Uint8Array(84);
    for (let g = 0; g < 16; g++) block[g] = scaleOf(g) | (minOf(g) << 4);
    for (let i = 0; i < 256; i++) {
      const half = i >> 7;
      const r = i & 127;
      block[16 + half * 32 + (r & 31)]! |= q[i]! << (2 * (r >> 5));
    }
    putHalf(block, 80, "0.5");
    putHalf(block, 82, "0.125");
    const expected = q.map((v, i) => 0.5 * scaleOf(i >> 4) * v - 0.125 * minOf(i >> 4));
    expectExactly(dequantize(GgmlType.Q2_K, block, 256), expected);
  });

  it("Q3_K: hmask bits (clear = minus 4), 6-bit scales offset by 32", () => {
    const q = ints(256, 8, 7).map((v) => v - 4); // -4..3
    const scale6 = Array.from({ length: 16 }, (_, k) => (k * 13 + 7) % 64);
    const block = new Uint8Array(110);
    for (let i = 0; i < 256; i++) {
      const half = i >> 7;
      const r = i & 127;
      const s = r >> 5;
      const l = r & 31;
      const low = q[i]! >= 0 ? q[i]! : q[i]! + 4;
      block[32 + half * 32 + l]! |= low << (2 * s);
      if (q[i]! >= 0) block[l]! |= 1 << (half * 4 + s);
    }
    for (let k = 0; k < 16; k++) {
      const low = scale6[k]! & 15;
      block[96 + (k % 8)]! |= k < 8 ? low : low << 4;
      block[96 + 8 + (k % 4)]! |= (scale6[k]! >> 4) << (2 * (k >> 2));
    }
    putHalf(block, 108, "0.5");
    const expected = q.map((v, i) => 0.5 * (scale6[i >> 4]! - 32) * v);
    expectExactly(dequantize(GgmlType.Q3_K, block, 256), expected);
  });
});

describe("reference fingerprints", () => {
  // [type, bytes per block, fp16 scale offsets, fnv1a of the float32 output, first, last]
  // from gguf-py quants.dequantize on randomBlocks(size, offsets, 8, type).
  const cases: [string, number, number, number[], number, number, number][] = [
    ["Q4_0", GgmlType.Q4_0, 18, [0], 0xc340c302, 0.5, -6.0],
    ["Q4_1", GgmlType.Q4_1, 20, [0, 2], 0x1a603049, 2.5, 0.5],
    ["Q5_0", GgmlType.Q5_0, 22, [0], 0xcce1d8cf, 1.5, -2.0],
    ["Q5_1", GgmlType.Q5_1, 24, [0, 2], 0x013f9ece, 28.5, -4.0],
    ["Q8_0", GgmlType.Q8_0, 34, [0], 0xba7adc5f, 57.0, -4.375],
    ["Q2_K", GgmlType.Q2_K, 84, [80, 82], 0x4da9ee3c, -2.0, 7.25],
    ["Q3_K", GgmlType.Q3_K, 110, [108], 0x4f706919, -51.0, 6.5],
    ["Q4_K", GgmlType.Q4_K, 144, [0, 2], 0x3afd23e4, 454.0, -52.0],
    ["Q5_K", GgmlType.Q5_K, 176, [0, 2], 0xd8590046, 26.875, -2.0],
    ["Q6_K", GgmlType.Q6_K, 210, [208], 0xa85bec88, -1998.0, -304.5],
  ];
  it.each(cases)(
    "%s matches llama.cpp's reference bit for bit",
    (_name, type, size, offsets, hash, first, last) => {
      const blockSize = size > 34 ? 256 : 32;
      const y = dequantize(type, randomBlocks(size, offsets, 8, type), 8 * blockSize);
      expect([y[0], y[y.length - 1]]).toEqual([first, last]);
      expect(fnv1a(new Uint8Array(y.buffer))).toBe(hash);
    },
  );
});

describe("arguments", () => {
  it("writes into a caller's buffer", () => {
    const out = new Float32Array(40).fill(9);
    const block = new Uint8Array(34);
    putHalf(block, 0, "1");
    block[2] = 5;
    expect(dequantize(GgmlType.Q8_0, block, 32, out)).toBe(out);
    expect([out[0], out[1], out[32]]).toEqual([5, 0, 9]);
  });

  it("rejects partial blocks, short input and unsupported types", () => {
    expect(() => dequantize(GgmlType.Q4_0, new Uint8Array(18), 16)).toThrow(/not a multiple of 32/);
    expect(() => dequantize(GgmlType.Q4_0, new Uint8Array(17), 32)).toThrow(/need 18 bytes, got 17/);
    expect(() => dequantize(16, new Uint8Array(66), 256)).toThrow(
      /unsupported ggml tensor type 16 \(IQ2_XXS\)/,
    );
    expect(() => dequantize(GgmlType.F32, new Uint8Array(8), 2, new Float32Array(1))).toThrow(/holds 1/);
  });

  it("dequantizes a 49152x576 Q8_0 tensor quickly", () => {
    const n = 49152 * 576;
    const bytes = new Uint8Array((n / 32) * 34);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131) & 0x7b; // keeps every fp16 d finite
    const out = new Float32Array(n);
    dequantize(GgmlType.Q8_0, bytes, n, out); // warm-up
    const t0 = performance.now();
    dequantize(GgmlType.Q8_0, bytes, n, out);
    expect(performance.now() - t0).toBeLessThan(1000);
  });
});
