/**
 * Maps GGUF weight blocks onto com.microsoft MatMulNBits, as exactly as the kernel allows.
 *
 * MatMulNBits computes, per block of `blockSize` input features, scale * (q - zeroPoint) with the
 * default zero point 2^(bits-1) (8 for 4-bit, 128 for 8-bit). Exact mappings:
 *   Q4_0: d*(q-8)                 → 4-bit, scale d                       (nibble reorder only)
 *   Q8_0: d*q                     → 8-bit, stored q+128, scale d
 *   Q4_1: d*q + m = d*(q-8) + c   → 4-bit, scale d, per-block offset c = m + 8d
 * A per-block offset c cannot be expressed as an integer zero point (float zero points force a slow
 * full dequantization on every call), so it is returned separately: the graph adds
 * blockSums(A) x C, where C[block, n] = c, taking the block sums from extra output rows appended to
 * the weight (`withBlockSumRows`). Other types are dequantized and requantized to 8-bit
 * blocks of 32 (symmetric, round to nearest), which keeps the error far below their own.
 */
import { fp16ToFloat32 } from "../gguf/half.ts";
import { GgmlType, type GgmlTypeId } from "../gguf/types.ts";

export const QUANT_BLOCK = 32;

export interface NBitsWeight {
  bits: 4 | 8;
  blockSize: number;
  /** Output features. */
  n: number;
  /** Input features. */
  k: number;
  /** [n, k/blockSize, blockSize*bits/8] */
  data: Uint8Array;
  /** [n, k/blockSize] */
  scales: Float32Array;
  /** [n, k/blockSize] per-block additive offsets, when the source format has them. */
  offsets?: Float32Array;
}

/** Reads the fp16 at byte offset `o`. */
function half(bytes: Uint8Array, o: number): number {
  return fp16ToFloat32(bytes[o]! | (bytes[o + 1]! << 8));
}

/** Q4_0 / Q4_1 nibbles hold elements j (low) and j+16 (high); MatMulNBits wants 2j (low), 2j+1 (high). */
function reorderNibbles(src: Uint8Array, srcOffset: number, dst: Uint8Array, dstOffset: number): void {
  for (let k = 0; k < 16; k++) {
    const e0 = 2 * k;
    const e1 = 2 * k + 1;
    const q0 = e0 < 16 ? src[srcOffset + e0]! & 15 : src[srcOffset + e0 - 16]! >> 4;
    const q1 = e1 < 16 ? src[srcOffset + e1]! & 15 : src[srcOffset + e1 - 16]! >> 4;
    dst[dstOffset + k] = q0 | (q1 << 4);
  }
}

function packQ4(bytes: Uint8Array, n: number, k: number, withMin: boolean): NBitsWeight {
  const blocks = n * (k / QUANT_BLOCK);
  const blockBytes = withMin ? 20 : 18;
  const quantOffset = withMin ? 4 : 2;
  const data = new Uint8Array(blocks * 16);
  const scales = new Float32Array(blocks);
  const offsets = withMin ? new Float32Array(blocks) : undefined;
  for (let b = 0; b < blocks; b++) {
    const o = b * blockBytes;
    const d = half(bytes, o);
    scales[b] = d;
    if (offsets) offsets[b] = half(bytes, o + 2) + 8 * d;
    reorderNibbles(bytes, o + quantOffset, data, b * 16);
  }
  return { bits: 4, blockSize: QUANT_BLOCK, n, k, data, scales, offsets };
}

function packQ8_0(bytes: Uint8Array, n: number, k: number): NBitsWeight {
  const blocks = n * (k / QUANT_BLOCK);
  const data = new Uint8Array(blocks * QUANT_BLOCK);
  const scales = new Float32Array(blocks);
  for (let b = 0; b < blocks; b++) {
    const o = b * 34;
    scales[b] = half(bytes, o);
    for (let i = 0; i < QUANT_BLOCK; i++) data[b * QUANT_BLOCK + i] = (bytes[o + 2 + i]! + 128) & 0xff;
  }
  return { bits: 8, blockSize: QUANT_BLOCK, n, k, data, scales };
}

/** Symmetric 8-bit blocks of 32 from float rows [n, k] (like Q8_0, with fp32 scales). */
export function quantize8(values: Float32Array, n: number, k: number): NBitsWeight {
  const blocks = n * (k / QUANT_BLOCK);
  const data = new Uint8Array(blocks * QUANT_BLOCK);
  const scales = new Float32Array(blocks);
  for (let b = 0; b < blocks; b++) {
    const base = b * QUANT_BLOCK;
    let amax = 0;
    for (let i = 0; i < QUANT_BLOCK; i++) amax = Math.max(amax, Math.abs(values[base + i]!));
    const d = amax / 127;
    const id = d ? 1 / d : 0;
    scales[b] = d;
    for (let i = 0; i < QUANT_BLOCK; i++) data[base + i] = Math.round(values[base + i]! * id) + 128;
  }
  return { bits: 8, blockSize: QUANT_BLOCK, n, k, data, scales };
}

/** Whether `type` maps onto MatMulNBits without requantizing. */
export function hasExactNBitsMapping(type: GgmlTypeId): boolean {
  return type === GgmlType.Q4_0 || type === GgmlType.Q4_1 || type === GgmlType.Q8_0;
}

/**
 * Packs a GGUF weight of n rows by k inputs. `dequantize` is used only for types without an exact
 * mapping.
 */
export function packNBits(
  type: GgmlTypeId,
  bytes: Uint8Array,
  n: number,
  k: number,
  dequantize: () => Float32Array,
): NBitsWeight {
  if (k % QUANT_BLOCK !== 0) throw new Error(`input features ${k} are not a multiple of ${QUANT_BLOCK}`);
  switch (type) {
    case GgmlType.Q4_0:
      return packQ4(bytes, n, k, false);
    case GgmlType.Q4_1:
      return packQ4(bytes, n, k, true);
    case GgmlType.Q8_0:
      return packQ8_0(bytes, n, k);
    default:
      return quantize8(dequantize(), n, k);
  }
}

/** Concatenates weights along the output dimension (e.g. Q, K and V into one projection). */
export function concatNBits(parts: NBitsWeight[]): NBitsWeight {
  const first = parts[0]!;
  const bits = parts.some((p) => p.bits === 8) ? 8 : 4;
  const normalized = parts.map((p) => (p.bits === bits ? p : widenTo8(p)));
  const n = normalized.reduce((s, p) => s + p.n, 0);
  const data = new Uint8Array(normalized.reduce((s, p) => s + p.data.length, 0));
  const scales = new Float32Array(normalized.reduce((s, p) => s + p.scales.length, 0));
  const anyOffsets = normalized.some((p) => p.offsets);
  const offsets = anyOffsets ? new Float32Array(scales.length) : undefined;
  let dataAt = 0;
  let scaleAt = 0;
  for (const p of normalized) {
    if (p.k !== first.k || p.blockSize !== first.blockSize)
      throw new Error("concatenated weights differ in K");
    data.set(p.data, dataAt);
    scales.set(p.scales, scaleAt);
    if (offsets && p.offsets) offsets.set(p.offsets, scaleAt);
    dataAt += p.data.length;
    scaleAt += p.scales.length;
  }
  return { bits, blockSize: first.blockSize, n, k: first.k, data, scales, offsets };
}

/** 4-bit blocks re-expressed as 8-bit blocks with the same scale (exact: q-8 fits in int8). */
function widenTo8(w: NBitsWeight): NBitsWeight {
  const blocks = w.scales.length;
  const data = new Uint8Array(blocks * w.blockSize);
  for (let b = 0; b < blocks; b++)
    for (let j = 0; j < w.blockSize / 2; j++) {
      const byte = w.data[b * (w.blockSize / 2) + j]!;
      data[b * w.blockSize + 2 * j] = (byte & 15) - 8 + 128;
      data[b * w.blockSize + 2 * j + 1] = (byte >> 4) - 8 + 128;
    }
  return { ...w, bits: 8, data };
}

/**
 * The weight with one extra output row per input block: row b has quants 1 over block b and 0
 * elsewhere (scale 1), so the same MatMulNBits also returns blockSums(A) as its last k/blockSize
 * outputs. With accuracy_level 4 these are the sums of the int8-quantized activations the kernel
 * multiplies (per-block absmax int8, like llama.cpp's Q8_1 sums), at the cost of a few extra rows
 * instead of a separate reduction subgraph.
 */
export function withBlockSumRows(w: NBitsWeight): NBitsWeight {
  const blocks = w.k / w.blockSize;
  const blockBytes = (w.blockSize * w.bits) / 8;
  // Default zero points: 8 (4-bit), 128 (8-bit); each nibble/byte holds zero point + 0 or + 1.
  const zero = w.bits === 4 ? 0x88 : 128;
  const one = w.bits === 4 ? 0x99 : 129;
  const data = new Uint8Array((w.n + blocks) * blocks * blockBytes);
  data.set(w.data);
  const base = w.n * blocks;
  data.fill(zero, base * blockBytes);
  const scales = new Float32Array((w.n + blocks) * blocks);
  scales.set(w.scales);
  for (let b = 0; b < blocks; b++) {
    const at = base + b * blocks + b;
    data.fill(one, at * blockBytes, (at + 1) * blockBytes);
    scales[at] = 1;
  }
  return { bits: w.bits, blockSize: w.blockSize, n: w.n + blocks, k: w.k, data, scales };
}

/** Transposes per-row block offsets [n, blocks] into the [blocks, n] matrix C the graph multiplies by. */
export function offsetMatrix(w: NBitsWeight): Float32Array {
  const blocks = w.k / w.blockSize;
  const c = new Float32Array(blocks * w.n);
  for (let r = 0; r < w.n; r++) for (let b = 0; b < blocks; b++) c[b * w.n + r] = w.offsets![r * blocks + b]!;
  return c;
}

/**
 * llama GGUF files store Q and K with rows permuted inside each head (GGUF row h*hd + 2i + j holds
 * Hugging Face row h*hd + j*hd/2 + i) for llama.cpp's consecutive-pair RoPE. Moving whole rows back
 * gives the half-rotation layout; rows are independent, so this works on quantized bytes too.
 */
export function unpermuteLlamaRows(rows: Uint8Array, nRows: number, heads: number): Uint8Array {
  const rowBytes = rows.length / nRows;
  const hd = nRows / heads;
  const out = new Uint8Array(rows.length);
  for (let h = 0; h < heads; h++)
    for (let j = 0; j < 2; j++)
      for (let i = 0; i < hd / 2; i++) {
        const hfRow = h * hd + j * (hd / 2) + i;
        const ggufRow = h * hd + 2 * i + j;
        out.set(rows.subarray(ggufRow * rowBytes, (ggufRow + 1) * rowBytes), hfRow * rowBytes);
      }
  return out;
}
