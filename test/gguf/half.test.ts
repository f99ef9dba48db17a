import { describe, expect, it } from "vitest";
import { float32ToFp16, fp16ToFloat32, roundToFp16 } from "../../src/models/gguf/half.ts";

describe("fp16", () => {
  it("encodes known values", () => {
    const cases: [number, number][] = [
      [0, 0x0000],
      [-0, 0x8000],
      [1, 0x3c00],
      [-2, 0xc000],
      [0.5, 0x3800],
      [65504, 0x7bff], // largest finite
      [65520, 0x7c00], // halfway to the next power rounds to infinity
      [1e6, 0x7c00],
      [-Infinity, 0xfc00],
      [2 ** -14, 0x0400], // smallest normal
      [2 ** -24, 0x0001], // smallest subnormal
      [2 ** -25, 0x0000], // tie between 0 and 2^-24 goes to even (0)
      [3 * 2 ** -25, 0x0002], // tie between 1 and 2 units goes to even (2)
      [1 + 2 ** -11, 0x3c00], // tie goes to the even mantissa
      [1 + 3 * 2 ** -11, 0x3c02],
      [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just above the tie rounds up
      [2 ** -14 - 2 ** -25, 0x0400], // rounding carries from subnormal into normal
    ];
    for (const [x, h] of cases) expect([x, float32ToFp16(x)]).toEqual([x, h]);
    const nan = float32ToFp16(Number.NaN);
    expect(nan & 0x7c00).toBe(0x7c00);
    expect(nan & 0x3ff).not.toBe(0);
  });

  it("decodes known patterns", () => {
    expect(fp16ToFloat32(0x3c00)).toBe(1);
    expect(fp16ToFloat32(0x3555)).toBe(0x555 * 2 ** -12);
    expect(fp16ToFloat32(0x8001)).toBe(-(2 ** -24));
    expect(fp16ToFloat32(0x7c00)).toBe(Infinity);
    expect(fp16ToFloat32(0x7e00)).toBeNaN();
    expect(Object.is(fp16ToFloat32(0x8000), -0)).toBe(true);
  });

  it("round-trips every non-NaN bit pattern", () => {
    for (let h = 0; h < 65536; h++) {
      const x = fp16ToFloat32(h);
      if (Number.isNaN(x)) continue;
      if (float32ToFp16(x) !== h) expect([h, float32ToFp16(x)]).toEqual([h, h]);
    }
    expect(roundToFp16(0.1)).toBe(0.0999755859375);
  });

  // Node 24's DataView.setFloat16 is an independent reference where it exists.
  const dv = new DataView(new ArrayBuffer(4)) as DataView & {
    setFloat16?: (o: number, v: number, le?: boolean) => void;
  };
  it.skipIf(typeof dv.setFloat16 !== "function")(
    "agrees with DataView.setFloat16 on many binary32 values",
    () => {
      const f32 = new Float32Array(1);
      const u32 = new Uint32Array(f32.buffer);
      let s = 1;
      for (let i = 0; i < 200_000; i++) {
        s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
        // Half the samples land in or near the fp16 range, where rounding is interesting.
        u32[0] = i % 2 ? s : (s & 0x80000000) | (0x30000000 + (s & 0x0fffffff));
        const x = f32[0]!;
        if (Number.isNaN(x)) continue;
        dv.setFloat16!(0, x, true);
        const want = dv.getUint16(0, true);
        if (float32ToFp16(x) !== want) expect([x, float32ToFp16(x)]).toEqual([x, want]);
      }
    },
  );
});
