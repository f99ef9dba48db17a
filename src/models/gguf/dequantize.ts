/**
 * ggml block formats to float32, bit-for-bit like llama.cpp's `dequantize_row_*` (ggml-quants.c).
 * Each product below is exact in binary32 (fp16 scale x small integer), so computing in doubles and
 * storing into a Float32Array rounds exactly where the C code rounds.
 */
import { ggmlTypeInfo } from "./ggml-types.ts";
import { FP16_TO_F32 as H } from "./half.ts";
import { GgmlType } from "./types.ts";

type Kernel = (q: Uint8Array, nb: number, out: Float32Array) => void;

/**
 * Decodes `elementCount` elements of ggml type `type` from `bytes` (ggml element order). Writes into
 * `out` when given (it must hold `elementCount` floats), else into a new array.
 */
export function dequantize(
  type: number,
  bytes: Uint8Array,
  elementCount: number,
  out?: Float32Array,
): Float32Array {
  const info = ggmlTypeInfo(type);
  if (!Number.isSafeInteger(elementCount) || elementCount < 0 || elementCount % info.blockSize !== 0) {
    throw new RangeError(
      `${info.name}: element count ${elementCount} is not a multiple of ${info.blockSize}`,
    );
  }
  const nb = elementCount / info.blockSize;
  const need = nb * info.typeSize;
  if (bytes.length < need) {
    throw new RangeError(`${info.name}: ${elementCount} elements need ${need} bytes, got ${bytes.length}`);
  }
  const y = out ?? new Float32Array(elementCount);
  if (y.length < elementCount) {
    throw new RangeError(`output holds ${y.length} floats, ${elementCount} needed`);
  }
  const kernel = KERNELS.get(type);
  if (kernel === undefined) throw new Error(`no dequantizer for ggml type ${info.name}`);
  kernel(bytes, nb, y);
  return y;
}

const KERNELS = new Map<number, Kernel>([
  [GgmlType.F32, f32],
  [GgmlType.F16, f16],
  [GgmlType.BF16, bf16],
  [GgmlType.F64, f64],
  [GgmlType.I8, i8],
  [GgmlType.I16, i16],
  [GgmlType.I32, i32],
  [GgmlType.I64, i64],
  [GgmlType.Q4_0, q4_0],
  [GgmlType.Q4_1, q4_1],
  [GgmlType.Q5_0, q5_0],
  [GgmlType.Q5_1, q5_1],
  [GgmlType.Q8_0, q8_0],
  [GgmlType.Q2_K, q2_K],
  [GgmlType.Q3_K, q3_K],
  [GgmlType.Q4_K, q4_K],
  [GgmlType.Q5_K, q5_K],
  [GgmlType.Q6_K, q6_K],
  [GgmlType.Q8_K, q8_K],
]);

/** A view of `q` whose start is aligned for `size`-byte elements (copies only when it is not). */
function alignedBuffer(q: Uint8Array, size: number, n: number): { buffer: ArrayBufferLike; offset: number } {
  if (q.byteOffset % size === 0) return { buffer: q.buffer, offset: q.byteOffset };
  const copy = q.slice(0, n * size);
  return { buffer: copy.buffer, offset: 0 };
}

function int8View(q: Uint8Array): Int8Array {
  return new Int8Array(q.buffer, q.byteOffset, q.length);
}

// Typed-array views use host byte order; GGUF (and every platform Node runs on here) is little-endian.
function f32(q: Uint8Array, n: number, y: Float32Array): void {
  new Uint8Array(y.buffer, y.byteOffset, n * 4).set(q.subarray(0, n * 4));
}

function f16(q: Uint8Array, n: number, y: Float32Array): void {
  for (let i = 0; i < n; i++) y[i] = H[q[2 * i]! | (q[2 * i + 1]! << 8)]!;
}

function bf16(q: Uint8Array, n: number, y: Float32Array): void {
  // bf16 is the top half of a binary32: shift the bits straight into place.
  const bits = new Uint32Array(y.buffer, y.byteOffset, n);
  for (let i = 0; i < n; i++) bits[i] = ((q[2 * i]! | (q[2 * i + 1]! << 8)) << 16) >>> 0;
}

function f64(q: Uint8Array, n: number, y: Float32Array): void {
  const a = alignedBuffer(q, 8, n);
  const src = new Float64Array(a.buffer, a.offset, n);
  for (let i = 0; i < n; i++) y[i] = src[i]!;
}

function i8(q: Uint8Array, n: number, y: Float32Array): void {
  const src = int8View(q);
  for (let i = 0; i < n; i++) y[i] = src[i]!;
}

function i16(q: Uint8Array, n: number, y: Float32Array): void {
  const a = alignedBuffer(q, 2, n);
  const src = new Int16Array(a.buffer, a.offset, n);
  for (let i = 0; i < n; i++) y[i] = src[i]!;
}

function i32(q: Uint8Array, n: number, y: Float32Array): void {
  const a = alignedBuffer(q, 4, n);
  const src = new Int32Array(a.buffer, a.offset, n);
  for (let i = 0; i < n; i++) y[i] = src[i]!;
}

function i64(q: Uint8Array, n: number, y: Float32Array): void {
  const a = alignedBuffer(q, 8, n);
  const src = new BigInt64Array(a.buffer, a.offset, n);
  for (let i = 0; i < n; i++) y[i] = Number(src[i]!);
}

function half(q: Uint8Array, o: number): number {
  return H[q[o]! | (q[o + 1]! << 8)]!;
}

/** Q4_0 (18 B / 32): d, 16 nibble bytes; byte j holds element j (low) and j+16 (high). x = d*(q-8). */
function q4_0(q: Uint8Array, nb: number, y: Float32Array): void {
  for (let b = 0, o = 0, e = 0; b < nb; b++, o += 18, e += 32) {
    const d = half(q, o);
    for (let j = 0; j < 16; j++) {
      const v = q[o + 2 + j]!;
      y[e + j] = d * ((v & 15) - 8);
      y[e + j + 16] = d * ((v >> 4) - 8);
    }
  }
}

/** Q4_1 (20 B / 32): d, m, nibbles as Q4_0. x = d*q + m. */
function q4_1(q: Uint8Array, nb: number, y: Float32Array): void {
  for (let b = 0, o = 0, e = 0; b < nb; b++, o += 20, e += 32) {
    const d = half(q, o);
    const m = half(q, o + 2);
    for (let j = 0; j < 16; j++) {
      const v = q[o + 4 + j]!;
      y[e + j] = d * (v & 15) + m;
      y[e + j + 16] = d * (v >> 4) + m;
    }
  }
}

function u32(q: Uint8Array, o: number): number {
  return (q[o]! | (q[o + 1]! << 8) | (q[o + 2]! << 16) | (q[o + 3]! << 24)) >>> 0;
}

/** Q5_0 (22 B / 32): d, qh (bit i = 5th bit of element i), nibbles. x = d*(q-16). */
function q5_0(q: Uint8Array, nb: number, y: Float32Array): void {
  for (let b = 0, o = 0, e = 0; b < nb; b++, o += 22, e += 32) {
    const d = half(q, o);
    const qh = u32(q, o + 2);
    for (let j = 0; j < 16; j++) {
      const v = q[o + 6 + j]!;
      const h0 = ((qh >>> j) & 1) << 4;
      const h1 = ((qh >>> (j + 16)) & 1) << 4;
      y[e + j] = d * (((v & 15) | h0) - 16);
      y[e + j + 16] = d * (((v >> 4) | h1) - 16);
    }
  }
}

/** Q5_1 (24 B / 32): d, m, qh, nibbles. x = d*q + m. */
function q5_1(q: Uint8Array, nb: number, y: Float32Array): void {
  for (let b = 0, o = 0, e = 0; b < nb; b++, o += 24, e += 32) {
    const d = half(q, o);
    const m = half(q, o + 2);
    const qh = u32(q, o + 4);
    for (let j = 0; j < 16; j++) {
      const v = q[o + 8 + j]!;
      const h0 = ((qh >>> j) & 1) << 4;
      const h1 = ((qh >>> (j + 16)) & 1) << 4;
      y[e + j] = d * ((v & 15) | h0) + m;
      y[e + j + 16] = d * ((v >> 4) | h1) + m;
    }
  }
}

/** Q8_0 (34 B / 32): d, 32 int8. x = d*q. */
function q8_0(q: Uint8Array, nb: number, y: Float32Array): void {
  const s = int8View(q);
  for (let b = 0, o = 0, e = 0; b < nb; b++, o += 34, e += 32) {
    const d = half(q, o);
    const p = o + 2;
    for (let j = 0; j < 32; j++) y[e + j] = d * s[p + j]!;
  }
}

/** Q8_K (292 B / 256): f32 d, 256 int8, 16 int16 block sums (unused here). x = d*q. */
function q8_K(q: Uint8Array, nb: number, y: Float32Array): void {
  const s = int8View(q);
  const view = new DataView(q.buffer, q.byteOffset, q.length);
  for (let b = 0, o = 0, e = 0; b < nb; b++, o += 292, e += 256) {
    const d = view.getFloat32(o, true);
    for (let j = 0; j < 256; j++) y[e + j] = d * s[o + 4 + j]!;
  }
}

/**
 * Q2_K (84 B / 256): scales[16] (low nibble scale, high nibble min), qs[64], d, dmin.
 * Each 32-byte half of qs serves 128 elements: 2-bit field `shift` of byte l is element
 * 32*(shift/2) + l of that half, in 16-element groups with their own scale.
 */
function q2_K(q: Uint8Array, nb: number, y: Float32Array): void {
  for (let b = 0, o = 0; b < nb; b++, o += 84) {
    const d = half(q, o + 80);
    const dmin = half(q, o + 82);
    let e = b * 256;
    let is = o;
    for (let n = 0; n < 2; n++) {
      const qs = o + 16 + n * 32;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let g = 0; g < 32; g += 16) {
          const sc = q[is++]!;
          const dl = d * (sc & 15);
          const ml = dmin * (sc >> 4);
          for (let l = 0; l < 16; l++) y[e++] = dl * ((q[qs + g + l]! >> shift) & 3) - ml;
        }
      }
    }
  }
}

/**
 * Q3_K (110 B / 256): hmask[32], qs[64], scales[12] (16 six-bit scales, offset 32), d.
 * The low 2 bits are laid out as Q2_K; hmask bit k of byte l is the high bit of element 32k + l,
 * and a clear high bit means the value is shifted down by 4.
 */
function q3_K(q: Uint8Array, nb: number, y: Float32Array): void {
  const sc = new Int32Array(16);
  for (let b = 0, o = 0; b < nb; b++, o += 110) {
    const d = half(q, o + 108);
    const s = o + 96;
    for (let i = 0; i < 4; i++) {
      const hi = q[s + 8 + i]!;
      const lo0 = q[s + i]!;
      const lo1 = q[s + 4 + i]!;
      sc[i] = ((lo0 & 15) | ((hi & 3) << 4)) - 32;
      sc[4 + i] = ((lo1 & 15) | (((hi >> 2) & 3) << 4)) - 32;
      sc[8 + i] = ((lo0 >> 4) | (((hi >> 4) & 3) << 4)) - 32;
      sc[12 + i] = ((lo1 >> 4) | (((hi >> 6) & 3) << 4)) - 32;
    }
    let e = b * 256;
    let is = 0;
    let m = 1;
    for (let n = 0; n < 2; n++) {
      const qs = o + 32 + n * 32;
      for (let shift = 0; shift < 8; shift += 2, m <<= 1) {
        for (let g = 0; g < 32; g += 16) {
          const dl = d * sc[is++]!;
          for (let l = 0; l < 16; l++) {
            const lowBits = (q[qs + g + l]! >> shift) & 3;
            y[e++] = dl * (lowBits - ((q[o + g + l]! & m) !== 0 ? 0 : 4));
          }
        }
      }
    }
  }
}

/**
 * The 8 six-bit (scale, min) pairs of Q4_K/Q5_K packed in 12 bytes at `s` (get_scale_min_k4):
 * pairs 0-3 use the low 6 bits of bytes 0-7; pairs 4-7 take their low nibbles from bytes 8-11
 * and their top 2 bits from the spare high bits of bytes 0-7.
 */
function unpackScaleMin(q: Uint8Array, s: number, scale: Int32Array, min: Int32Array): void {
  for (let j = 0; j < 4; j++) {
    scale[j] = q[s + j]! & 63;
    min[j] = q[s + j + 4]! & 63;
  }
  for (let j = 4; j < 8; j++) {
    scale[j] = (q[s + j + 4]! & 15) | ((q[s + j - 4]! >> 6) << 4);
    min[j] = (q[s + j + 4]! >> 4) | ((q[s + j]! >> 6) << 4);
  }
}

/**
 * Q4_K (144 B / 256): d, dmin, scales[12], qs[128]. 32-byte chunk c holds sub-block 2c in its low
 * nibbles and 2c+1 in its high nibbles. x = d*scale*q - dmin*min.
 */
function q4_K(q: Uint8Array, nb: number, y: Float32Array): void {
  const scale = new Int32Array(8);
  const min = new Int32Array(8);
  for (let b = 0, o = 0; b < nb; b++, o += 144) {
    const d = half(q, o);
    const dmin = half(q, o + 2);
    unpackScaleMin(q, o + 4, scale, min);
    let e = b * 256;
    for (let c = 0; c < 4; c++) {
      const qs = o + 16 + c * 32;
      const d1 = d * scale[2 * c]!;
      const m1 = dmin * min[2 * c]!;
      const d2 = d * scale[2 * c + 1]!;
      const m2 = dmin * min[2 * c + 1]!;
      for (let l = 0; l < 32; l++) y[e++] = d1 * (q[qs + l]! & 15) - m1;
      for (let l = 0; l < 32; l++) y[e++] = d2 * (q[qs + l]! >> 4) - m2;
    }
  }
}

/**
 * Q5_K (176 B / 256): d, dmin, scales[12], qh[32], qs[128]. Low 4 bits as Q4_K; the 5th bit of
 * element l of sub-block k is bit k of qh[l].
 */
function q5_K(q: Uint8Array, nb: number, y: Float32Array): void {
  const scale = new Int32Array(8);
  const min = new Int32Array(8);
  for (let b = 0, o = 0; b < nb; b++, o += 176) {
    const d = half(q, o);
    const dmin = half(q, o + 2);
    unpackScaleMin(q, o + 4, scale, min);
    const qh = o + 16;
    let e = b * 256;
    for (let c = 0; c < 4; c++) {
      const qs = o + 48 + c * 32;
      const u1 = 1 << (2 * c);
      const u2 = 2 << (2 * c);
      const d1 = d * scale[2 * c]!;
      const m1 = dmin * min[2 * c]!;
      const d2 = d * scale[2 * c + 1]!;
      const m2 = dmin * min[2 * c + 1]!;
      for (let l = 0; l < 32; l++)
        y[e++] = d1 * ((q[qs + l]! & 15) + ((q[qh + l]! & u1) !== 0 ? 16 : 0)) - m1;
      for (let l = 0; l < 32; l++)
        y[e++] = d2 * ((q[qs + l]! >> 4) + ((q[qh + l]! & u2) !== 0 ? 16 : 0)) - m2;
    }
  }
}

/**
 * Q6_K (210 B / 256): ql[128], qh[64], int8 scales[16], d (last). Per 128-element half: element
 * l + 32k takes its low nibble from ql[l + 32*(k&1)] (k<2 low nibble, else high) and its top 2 bits
 * from bits 2k..2k+1 of qh[l]; 16-element groups share a scale. x = d*scale*(q-32).
 */
function q6_K(q: Uint8Array, nb: number, y: Float32Array): void {
  const s = int8View(q);
  for (let b = 0, o = 0; b < nb; b++, o += 210) {
    const d = half(q, o + 208);
    for (let n = 0; n < 2; n++) {
      const ql = o + n * 64;
      const qh = o + 128 + n * 32;
      const sc = o + 192 + n * 8;
      const e = b * 256 + n * 128;
      for (let l = 0; l < 32; l++) {
        const is = l >> 4;
        const h = q[qh + l]!;
        const a = q[ql + l]!;
        const c = q[ql + l + 32]!;
        // d*scale is exact, so the one rounding on store matches C's (d * sc) * q.
        y[e + l] = d * s[sc + is]! * (((a & 15) | ((h & 3) << 4)) - 32);
        y[e + l + 32] = d * s[sc + is + 2]! * (((c & 15) | (((h >> 2) & 3) << 4)) - 32);
        y[e + l + 64] = d * s[sc + is + 4]! * (((a >> 4) | (((h >> 4) & 3) << 4)) - 32);
        y[e + l + 96] = d * s[sc + is + 6]! * (((c >> 4) | (((h >> 6) & 3) << 4)) - 32);
      }
    }
  }
}
