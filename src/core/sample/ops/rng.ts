/**
 * Per-sequence random numbers: xoshiro128** seeded through splitmix64 from a
 * signed 64-bit seed. Only 32-bit integer arithmetic runs per draw, so every
 * platform produces the same stream for the same seed.
 */

const MASK64 = (1n << 64n) - 1n;
const INT64_MIN = -(1n << 63n);
const UINT64_MAX = MASK64;

export type Seed = number | bigint;

/**
 * The seed as 64 unsigned bits. Accepts the int64 range (negative seeds are
 * taken as two's complement) and, for callers that already hold unsigned bits,
 * values up to 2^64 - 1.
 */
export function seedBits(seed: Seed): bigint {
  if (typeof seed === "number" && !Number.isSafeInteger(seed)) {
    throw new RangeError(`seed must be a safe integer or a bigint, got ${seed}`);
  }
  const s = BigInt(seed);
  if (s < INT64_MIN || s > UINT64_MAX) throw new RangeError(`seed ${s} is outside the 64-bit range`);
  return BigInt.asUintN(64, s);
}

/**
 * Seed of choice `index` of an n > 1 request: `seed + index`, wrapped to int64
 * the way a C int64 addition would wrap.
 */
export function seedForChoice(seed: Seed, index: number): bigint {
  if (!Number.isSafeInteger(index) || index < 0) throw new RangeError(`choice index ${index} is invalid`);
  return BigInt.asIntN(64, BigInt.asIntN(64, seedBits(seed)) + BigInt(index));
}

/** A fresh unpredictable seed, for requests that did not give one. */
export function randomSeed(): bigint {
  const words = crypto.getRandomValues(new Uint32Array(2));
  return BigInt.asIntN(64, (BigInt(words[0]) << 32n) | BigInt(words[1]));
}

function splitmix64(state: bigint): [next: bigint, output: bigint] {
  const next = (state + 0x9e3779b97f4a7c15n) & MASK64;
  let z = next;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return [next, z ^ (z >> 31n)];
}

const TWO_POW_MINUS_53 = 2 ** -53;

export class Xoshiro128 {
  #s0: number;
  #s1: number;
  #s2: number;
  #s3: number;

  constructor(seed: Seed) {
    const [state, a] = splitmix64(seedBits(seed));
    const [, b] = splitmix64(state);
    this.#s0 = Number(a & 0xffffffffn) | 0;
    this.#s1 = Number(a >> 32n) | 0;
    this.#s2 = Number(b & 0xffffffffn) | 0;
    this.#s3 = Number(b >> 32n) | 0;
    // splitmix64 never yields two zero outputs in a row, but the all-zero state would be a fixed point.
    if ((this.#s0 | this.#s1 | this.#s2 | this.#s3) === 0) this.#s0 = 1;
  }

  /** Next 32 random bits as an unsigned integer. */
  nextUint32(): number {
    const s1 = this.#s1;
    const r = Math.imul(rotl(Math.imul(s1, 5), 7), 9);
    const t = s1 << 9;
    this.#s2 ^= this.#s0;
    this.#s3 ^= s1;
    this.#s1 ^= this.#s2;
    this.#s0 ^= this.#s3;
    this.#s2 ^= t;
    this.#s3 = rotl(this.#s3, 11);
    return r >>> 0;
  }

  /** Uniform double in [0, 1) with 53 random bits (two 32-bit outputs). */
  nextDouble(): number {
    const hi = this.nextUint32() >>> 5; // 27 bits
    const lo = this.nextUint32() >>> 6; // 26 bits
    return (hi * 67108864 + lo) * TWO_POW_MINUS_53;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
