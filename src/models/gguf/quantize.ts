/**
 * Reference quantizers matching llama.cpp's `quantize_row_*_ref` (ggml-quants.c) byte for byte, used
 * to write synthetic GGUF models. The C code works in binary32, so every intermediate result here
 * goes through Math.fround.
 */
import { ggmlTypeInfo } from "./ggml-types.ts";
import { float32ToFp16 } from "./half.ts";
import { GgmlType } from "./types.ts";

const f = Math.fround;

/** Quantizes `values` (a multiple of the type's block size) to ggml type `type`. */
export function quantize(type: number, values: ArrayLike<number>): Uint8Array {
  switch (type) {
    case GgmlType.F32:
      return encodeF32(values);
    case GgmlType.F16:
      return encodeF16(values);
    case GgmlType.BF16:
      return encodeBF16(values);
    case GgmlType.Q4_0:
      return quantizeQ4_0(values);
    case GgmlType.Q4_1:
      return quantizeQ4_1(values);
    case GgmlType.Q5_0:
      return quantizeQ5_0(values);
    case GgmlType.Q5_1:
      return quantizeQ5_1(values);
    case GgmlType.Q8_0:
      return quantizeQ8_0(values);
    default:
      throw new Error(`no quantizer for ggml type ${ggmlTypeInfo(type).name}`);
  }
}

export function encodeF32(values: ArrayLike<number>): Uint8Array {
  return new Uint8Array(Float32Array.from(values).buffer);
}

export function encodeF16(values: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  for (let i = 0; i < values.length; i++) put16(out, 2 * i, float32ToFp16(values[i]!));
  return out;
}

/** ggml_compute_fp32_to_bf16: round to nearest even, NaN forced quiet. */
export function encodeBF16(values: ArrayLike<number>): Uint8Array {
  const bits = new Uint32Array(Float32Array.from(values).buffer);
  const out = new Uint8Array(values.length * 2);
  for (let i = 0; i < bits.length; i++) {
    const u = bits[i]!;
    const h = (u & 0x7fffffff) > 0x7f800000 ? (u >>> 16) | 64 : (u + 0x7fff + ((u >>> 16) & 1)) >>> 16;
    put16(out, 2 * i, h & 0xffff);
  }
  return out;
}

function put16(out: Uint8Array, o: number, v: number): void {
  out[o] = v & 0xff;
  out[o + 1] = v >>> 8;
}

function blocks(values: ArrayLike<number>, qk: number, name: string): number {
  if (values.length % qk !== 0) {
    throw new RangeError(`${name}: ${values.length} values is not a multiple of the block size ${qk}`);
  }
  return values.length / qk;
}

/** The value of largest magnitude (the first one on ties), with its sign: the Q4_0/Q5_0 scale source. */
function signedAbsMax(x: Float32Array, start: number, qk: number): number {
  let amax = 0;
  let max = 0;
  for (let j = 0; j < qk; j++) {
    const v = x[start + j]!;
    if (amax < Math.abs(v)) {
      amax = Math.abs(v);
      max = v;
    }
  }
  return max;
}

function minMax(x: Float32Array, start: number, qk: number): [number, number] {
  let min = 3.4028234663852886e38;
  let max = -3.4028234663852886e38;
  for (let j = 0; j < qk; j++) {
    const v = x[start + j]!;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return [min, max];
}

/** C's (int8_t) cast of a float in range: truncation toward zero. */
const trunc = Math.trunc;

/** Q4_0: d = max/-8 (max keeps its sign), q = min(15, (int8)(x/d + 8.5)). */
export function quantizeQ4_0(values: ArrayLike<number>): Uint8Array {
  const nb = blocks(values, 32, "Q4_0");
  const x = Float32Array.from(values);
  const out = new Uint8Array(nb * 18);
  for (let b = 0; b < nb; b++) {
    const s = b * 32;
    const o = b * 18;
    const d = f(signedAbsMax(x, s, 32) / -8);
    const id = d !== 0 ? f(1 / d) : 0;
    put16(out, o, float32ToFp16(d));
    for (let j = 0; j < 16; j++) {
      const q0 = Math.min(15, trunc(f(f(x[s + j]! * id) + 8.5)));
      const q1 = Math.min(15, trunc(f(f(x[s + j + 16]! * id) + 8.5)));
      out[o + 2 + j] = q0 | (q1 << 4);
    }
  }
  return out;
}

/** Q4_1: d = (max-min)/15, m = min, q = min(15, (int8)((x-min)/d + 0.5)). */
export function quantizeQ4_1(values: ArrayLike<number>): Uint8Array {
  const nb = blocks(values, 32, "Q4_1");
  const x = Float32Array.from(values);
  const out = new Uint8Array(nb * 20);
  for (let b = 0; b < nb; b++) {
    const s = b * 32;
    const o = b * 20;
    const [min, max] = minMax(x, s, 32);
    const d = f(f(max - min) / 15);
    const id = d !== 0 ? f(1 / d) : 0;
    put16(out, o, float32ToFp16(d));
    put16(out, o + 2, float32ToFp16(min));
    for (let j = 0; j < 16; j++) {
      const q0 = Math.min(15, trunc(f(f(f(x[s + j]! - min) * id) + 0.5)));
      const q1 = Math.min(15, trunc(f(f(f(x[s + j + 16]! - min) * id) + 0.5)));
      out[o + 4 + j] = q0 | (q1 << 4);
    }
  }
  return out;
}

/** Q5_0: d = max/-16, q = min(31, (int8)(x/d + 16.5)); bit 4 of q goes to qh. */
export function quantizeQ5_0(values: ArrayLike<number>): Uint8Array {
  const nb = blocks(values, 32, "Q5_0");
  const x = Float32Array.from(values);
  const out = new Uint8Array(nb * 22);
  for (let b = 0; b < nb; b++) {
    const s = b * 32;
    const o = b * 22;
    const d = f(signedAbsMax(x, s, 32) / -16);
    const id = d !== 0 ? f(1 / d) : 0;
    put16(out, o, float32ToFp16(d));
    let qh = 0;
    for (let j = 0; j < 16; j++) {
      const q0 = Math.min(31, trunc(f(f(x[s + j]! * id) + 16.5)));
      const q1 = Math.min(31, trunc(f(f(x[s + j + 16]! * id) + 16.5)));
      out[o + 6 + j] = (q0 & 15) | ((q1 & 15) << 4);
      qh |= ((q0 >> 4) << j) | ((q1 >> 4) << (j + 16));
    }
    put32(out, o + 2, qh);
  }
  return out;
}

/** Q5_1: d = (max-min)/31, m = min, q = (uint8)((x-min)/d + 0.5). */
export function quantizeQ5_1(values: ArrayLike<number>): Uint8Array {
  const nb = blocks(values, 32, "Q5_1");
  const x = Float32Array.from(values);
  const out = new Uint8Array(nb * 24);
  for (let b = 0; b < nb; b++) {
    const s = b * 32;
    const o = b * 24;
    const [min, max] = minMax(x, s, 32);
    const d = f(f(max - min) / 31);
    const id = d !== 0 ? f(1 / d) : 0;
    put16(out, o, float32ToFp16(d));
    put16(out, o + 2, float32ToFp16(min));
    let qh = 0;
    for (let j = 0; j < 16; j++) {
      // The C code has no clamp here; 31 is only ever exceeded by rounding noise, which this absorbs.
      const q0 = Math.min(31, trunc(f(f(f(x[s + j]! - min) * id) + 0.5)));
      const q1 = Math.min(31, trunc(f(f(f(x[s + j + 16]! - min) * id) + 0.5)));
      out[o + 8 + j] = (q0 & 15) | ((q1 & 15) << 4);
      qh |= ((q0 >> 4) << j) | ((q1 >> 4) << (j + 16));
    }
    put32(out, o + 4, qh);
  }
  return out;
}

function put32(out: Uint8Array, o: number, v: number): void {
  out[o] = v & 0xff;
  out[o + 1] = (v >>> 8) & 0xff;
  out[o + 2] = (v >>> 16) & 0xff;
  out[o + 3] = (v >>> 24) & 0xff;
}

/** C roundf: halves round away from zero (Math.round would send -2.5 to -2). */
function roundf(v: number): number {
  return v < 0 ? -Math.floor(-v + 0.5) : Math.floor(v + 0.5);
}

/** Q8_0: d = amax/127, q = roundf(x/d). */
export function quantizeQ8_0(values: ArrayLike<number>): Uint8Array {
  const nb = blocks(values, 32, "Q8_0");
  const x = Float32Array.from(values);
  const out = new Uint8Array(nb * 34);
  for (let b = 0; b < nb; b++) {
    const s = b * 32;
    const o = b * 34;
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[s + j]!));
    const d = f(amax / 127);
    const id = d !== 0 ? f(1 / d) : 0;
    put16(out, o, float32ToFp16(d));
    for (let j = 0; j < 32; j++) out[o + 2 + j] = roundf(f(x[s + j]! * id)) & 0xff;
  }
  return out;
}
