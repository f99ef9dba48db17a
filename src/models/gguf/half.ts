/**
 * IEEE 754 binary16 conversions. Kept in software (not Float16Array) because Node 22 lacks it and
 * because the decode table below makes the dequantizers' scale lookups a single array read.
 */

/** Every fp16 bit pattern decoded, built from bits so NaN payloads and -0 survive. */
export const FP16_TO_F32: Float32Array = buildTable();

function buildTable(): Float32Array {
  const table = new Float32Array(65536);
  const bits = new Uint32Array(table.buffer);
  for (let h = 0; h < 65536; h++) {
    const sign = (h & 0x8000) << 16;
    const exp = (h >>> 10) & 0x1f;
    const mant = h & 0x3ff;
    if (exp === 0) {
      // Zero or subnormal: mant * 2^-24 is exact in binary32.
      table[h] = (sign ? -1 : 1) * mant * 2 ** -24;
    } else if (exp === 31) {
      bits[h] = sign | 0x7f800000 | (mant << 13);
    } else {
      bits[h] = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
  }
  return table;
}

export function fp16ToFloat32(h: number): number {
  return FP16_TO_F32[h & 0xffff]!;
}

const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/**
 * Rounds to the nearest fp16 (ties to even) like ggml's FP32_TO_FP16 / F16C. The input is first
 * rounded to binary32, as it would be in C. Overflow gives infinity; NaN stays a quiet NaN.
 */
export function float32ToFp16(x: number): number {
  scratchF32[0] = x;
  const bits = scratchU32[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e >= 1) {
    let h = (e << 10) | (mant >>> 13);
    const rest = mant & 0x1fff;
    // A carry out of the mantissa correctly bumps the exponent (up to infinity).
    if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h++;
    return sign | h;
  }
  // Subnormal result: the value in units of 2^-24 is full >> shift.
  const shift = 14 - e;
  if (shift > 24) return sign;
  const full = mant | 0x800000;
  let h = full >>> shift;
  const rest = full & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  if (rest > halfway || (rest === halfway && (h & 1) === 1)) h++;
  return sign | h;
}

/** Rounds to binary32 then to fp16 and back: the value a half field will hold. */
export function roundToFp16(x: number): number {
  return FP16_TO_F32[float32ToFp16(x)]!;
}
