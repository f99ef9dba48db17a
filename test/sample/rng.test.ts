import { describe, expect, it } from "vitest";
import { randomSeed, seedBits, seedForChoice, Xoshiro128 } from "../../src/core/sample/ops/rng.ts";

const take = (rng: Xoshiro128, n: number) => Array.from({ length: n }, () => rng.nextUint32());

describe("Xoshiro128 seeded through splitmix64", () => {
  it("matches the C reference implementation", () => {
    // Outputs of the reference C code (splitmix64 → xoshiro128**) for these int64 seeds.
    expect(take(new Xoshiro128(42), 6)).toEqual([
      1776835114, 4165204688, 17111135, 2317295270, 2792088233, 2554630222,
    ]);
    expect(take(new Xoshiro128(0), 3)).toEqual([3737715805, 2584255861, 2876756834]);
    expect(take(new Xoshiro128(-1), 3)).toEqual([477689756, 2493998634, 555695776]);
    expect(take(new Xoshiro128(9223372036854775807n), 3)).toEqual([544013370, 1183312684, 2872889145]);
    expect(take(new Xoshiro128(-9223372036854775808n), 3)).toEqual([3018735316, 3957124015, 3205658156]);
    expect(take(new Xoshiro128(12345678901234567n), 3)).toEqual([3623721579, 29973294, 1629501415]);
  });

  it("treats a number and the equal bigint, and a negative seed and its two's complement, alike", () => {
    expect(take(new Xoshiro128(123), 4)).toEqual(take(new Xoshiro128(123n), 4));
    expect(take(new Xoshiro128(-5), 4)).toEqual(take(new Xoshiro128(2n ** 64n - 5n), 4));
  });

  it("rejects seeds outside 64 bits and unsafe numbers", () => {
    expect(() => seedBits(2n ** 64n)).toThrow(RangeError);
    expect(() => seedBits(-(2n ** 63n) - 1n)).toThrow(RangeError);
    expect(() => seedBits(2 ** 60)).toThrow(RangeError);
    expect(() => seedBits(1.5)).toThrow(RangeError);
  });

  it("draws doubles in [0, 1) with a plausible mean", () => {
    const rng = new Xoshiro128(1);
    let sum = 0;
    for (let i = 0; i < 100_000; i++) {
      const u = rng.nextDouble();
      expect(u >= 0 && u < 1).toBe(true);
      sum += u;
    }
    expect(sum / 100_000).toBeCloseTo(0.5, 2);
  });
});

describe("seedForChoice", () => {
  it("adds the choice index", () => {
    expect(seedForChoice(100, 0)).toBe(100n);
    expect(seedForChoice(100, 3)).toBe(103n);
    expect(seedForChoice(-2, 1)).toBe(-1n);
  });

  it("wraps around int64", () => {
    expect(seedForChoice(9223372036854775807n, 1)).toBe(-9223372036854775808n);
    expect(seedForChoice(9223372036854775806n, 3)).toBe(-9223372036854775807n);
  });

  it("gives each choice its own stream", () => {
    expect(take(new Xoshiro128(seedForChoice(5, 1)), 3)).not.toEqual(
      take(new Xoshiro128(seedForChoice(5, 0)), 3),
    );
  });
});

describe("randomSeed", () => {
  it("returns an int64", () => {
    const s = randomSeed();
    expect(s >= -(2n ** 63n) && s < 2n ** 63n).toBe(true);
    expect(randomSeed()).not.toBe(s);
  });
});
