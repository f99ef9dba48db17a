/**
 * Maps GGUF weight blocks onto com.microsoft MatMulNBits exactly: the values the file encodes,
 * no requantization.
 *
 * MatMulNBits computes, per block of `blockSize` input features, scale * (q - zeroPoint) with the
 * default zero point 2^(bits-1) (8 for 4-bit, 128 for 8-bit). Every type integer-blocks.ts
 * decomposes (weight = s * q + a per sub-block, s and a exact in float32) maps so:
 *   q in [-8, 7]                → 4-bit, stored q + 8, scale s        (Q4_0, Q3_K)
 *   q in [0, 15] with offsets    → 4-bit, stored q, scale s, offset a + 8s when float32 holds it
 *                                  exactly (Q4_1, Q4_K, Q2_K; else as below)
 *   otherwise (q in [-128, 127]) → 8-bit, stored q + 128, scale s, offset a
 *                                  (Q5_0, Q5_1, Q8_0, Q5_K, Q6_K)
 * with blocks of 16 for types whose scales (and offsets) come per 16 elements (Q6_K, Q3_K, Q2_K). A per-block offset
 * cannot be expressed as an integer zero point (float zero points force a slow full dequantization
 * on every call), so it is returned separately: the graph adds blockSums(A) x C, where
 * C[block, n] = offset, taking the block sums from extra output rows appended to the weight
 * (`withBlockSumRows`). Other types have no exact mapping: float ones the GGUF converter keeps as
 * floats instead (table-weights.ts `keptAsFloats`: F32 as float32, F16 and BF16 in their own 16
 * bits, native/src/half-matmul.h); any other (Q8_K, which
 * no model file uses) is dequantized and requantized to 8-bit blocks of 32 only when the caller
 * allows it.
 *
 * The ONNX file stores these 4- and 8-bit; the native kernel packs them back as narrow as the
 * values allow (2-bit Q2_K, 3-bit Q3_K, 5-bit Q5_0/Q5_1/Q5_K, 6-bit Q6_K; K-quant sub-block
 * scales coded under a half factor in the file's widths, 4, 6 or 8 bits:
 * docs/formats-and-kernels.md has the bits per weight it reads).
 *
 * The kernels quantize activations to int8 in blocks of 32 (as llama.cpp's Q8_0/Q8_1), or, asked
 * with `q8kActivations`, for the K-quants in llama.cpp's own Q8_K blocks of 256 (one scale per 256
 * inputs: its arithmetic, and further from the exact model: docs/formats-and-kernels.md);
 * `activationBlock` carries that to the kernel.
 */
import { ggmlTypeInfo, ggmlTypeName } from "../gguf/ggml-types.ts";
import { GgmlType, type GgmlTypeId } from "../gguf/types.ts";
import { integerBlocks } from "./integer-blocks.ts";

export const QUANT_BLOCK = 32;

export interface NBitsWeight {
  bits: 4 | 8;
  /** Input features per scale: 32, or 16 (GGUF's 16-element sub-blocks). */
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
  /**
   * 256: the activations this weight multiplies are quantized in blocks of 256 inputs, one scale
   * each (llama.cpp's Q8_K, which it pairs with the K-quants); absent: blocks of 32.
   */
  activationBlock?: 256;
}

/**
 * 256 when llama.cpp quantizes the activations for a weight of `type` in Q8_K blocks: the types
 * whose own blocks are 256 (the K-quants).
 */
export function activationBlockOf(type: GgmlTypeId): 256 | undefined {
  return ggmlTypeInfo(type).blockSize === 256 ? 256 : undefined;
}

/**
 * The weight `type`'s n x k elements encode, exactly, as MatMulNBits blocks; undefined for types
 * without an exact mapping.
 */
export function exactNBits(
  type: GgmlTypeId,
  bytes: Uint8Array,
  n: number,
  k: number,
): NBitsWeight | undefined {
  const blocks = integerBlocks(type, bytes, n * k);
  if (!blocks) return undefined;
  const { q, scales, subBlock } = blocks;
  let offsets = blocks.offsets;
  let bits: 4 | 8 = 8;
  let bias = 128;
  if (blocks.min >= -8 && blocks.max <= 7) {
    bits = 4;
    bias = 8;
  } else if (blocks.min >= 0 && blocks.max <= 15 && offsets) {
    // s*q + a = s*(q - 8) + (a + 8s): the zero point goes into the offset, where float32 holds it.
    const folded = new Float32Array(offsets.length);
    let exact = true;
    for (let i = 0; i < offsets.length && exact; i++) {
      const c = offsets[i]! + 8 * scales[i]!;
      folded[i] = c;
      exact = folded[i] === c;
    }
    if (exact) {
      bits = 4;
      bias = 0;
      offsets = folded;
    }
  }
  const data = new Uint8Array((n * k * bits) / 8);
  if (bits === 8) for (let i = 0; i < q.length; i++) data[i] = q[i]! + bias;
  else for (let i = 0; i < data.length; i++) data[i] = (q[2 * i]! + bias) | ((q[2 * i + 1]! + bias) << 4);
  const activationBlock = activationBlockOf(type);
  return {
    bits,
    blockSize: subBlock,
    n,
    k,
    data,
    scales,
    offsets,
    ...(activationBlock && { activationBlock }),
  };
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

/** How packNBits maps a tensor. */
export interface PackOptions {
  /** The tensor, for errors. */
  name: string;
  /** Requantize types without an exact mapping to 8-bit blocks instead of refusing them. */
  allowRequantize?: boolean;
  /** K-quants: activations in llama.cpp's Q8_K blocks of 256 (its arithmetic) instead of blocks of 32. */
  q8kActivations?: boolean;
}

/** A type without an exact mapping, met without `allowRequantize`. */
export class InexactQuantTypeError extends Error {
  constructor(name: string, type: GgmlTypeId) {
    const float = type === GgmlType.F32 || type === GgmlType.F16 || type === GgmlType.BF16;
    super(
      `tensor ${name} is ${ggmlTypeName(type)}, which ortserve cannot map exactly onto its quantized kernels; ` +
        `${float ? "convert with --format fp32 to keep its values, or " : "convert "}` +
        "with --allow-requantize to requantize it to 8-bit blocks (a different model)",
    );
    this.name = "InexactQuantTypeError";
  }
}

/**
 * Packs a GGUF weight of n rows by k inputs: exactly (exactNBits), or, for a type without an
 * exact mapping and only with `allowRequantize`, `dequantize`d and requantized to 8-bit blocks.
 */
export function packNBits(
  type: GgmlTypeId,
  bytes: Uint8Array,
  n: number,
  k: number,
  dequantize: () => Float32Array,
  opts: PackOptions,
): { weight: NBitsWeight; exact: boolean } {
  if (k % QUANT_BLOCK !== 0) throw new Error(`input features ${k} are not a multiple of ${QUANT_BLOCK}`);
  const weight = exactNBits(type, bytes, n, k);
  if (weight && !opts.q8kActivations) delete weight.activationBlock;
  if (weight) return { weight, exact: true };
  if (!opts.allowRequantize) throw new InexactQuantTypeError(opts.name, type);
  return { weight: quantize8(dequantize(), n, k), exact: false };
}

/**
 * Concatenates weights along the output dimension (e.g. Q, K and V into one projection), in the
 * widest form any part needs (8 bits, scales per 16, offsets), each part re-expressed exactly (the
 * native kernel packs each part's tiles in their own narrower form again: PackedProjection).
 * Debt: one projection quantizes its activations one way, so a stack whose parts llama.cpp
 * multiplies with different activation blocks (a Q5_0 Q beside a Q6_K V) takes blocks of 32 for
 * all of them, the finer of the two (closer to the exact model, not llama.cpp's arithmetic).
 */
export function concatNBits(parts: NBitsWeight[]): NBitsWeight {
  const first = parts[0]!;
  const bits = parts.some((p) => p.bits === 8) ? 8 : 4;
  const blockSize = Math.min(...parts.map((p) => p.blockSize));
  const normalized = parts.map((p) => withScaleBlock(p.bits === bits ? p : widenTo8(p), blockSize));
  const n = normalized.reduce((s, p) => s + p.n, 0);
  const data = new Uint8Array(normalized.reduce((s, p) => s + p.data.length, 0));
  const scales = new Float32Array(normalized.reduce((s, p) => s + p.scales.length, 0));
  const anyOffsets = normalized.some((p) => p.offsets);
  const offsets = anyOffsets ? new Float32Array(scales.length) : undefined;
  let dataAt = 0;
  let scaleAt = 0;
  for (const p of normalized) {
    if (p.k !== first.k) throw new Error("concatenated weights differ in K");
    data.set(p.data, dataAt);
    scales.set(p.scales, scaleAt);
    if (offsets && p.offsets) offsets.set(p.offsets, scaleAt);
    dataAt += p.data.length;
    scaleAt += p.scales.length;
  }
  const activationBlock = parts.every((p) => p.activationBlock === 256) ? 256 : undefined;
  return {
    bits,
    blockSize,
    n,
    k: first.k,
    data,
    scales,
    offsets,
    ...(activationBlock && { activationBlock }),
  };
}

/** The weight with scales (and offsets) per `blockSize` inputs, repeating coarser ones (exact). */
function withScaleBlock(w: NBitsWeight, blockSize: number): NBitsWeight {
  if (w.blockSize === blockSize) return w;
  const repeat = w.blockSize / blockSize;
  const spread = (v: Float32Array) => {
    const out = new Float32Array(v.length * repeat);
    for (let i = 0; i < out.length; i++) out[i] = v[Math.floor(i / repeat)]!;
    return out;
  };
  return { ...w, blockSize, scales: spread(w.scales), offsets: w.offsets && spread(w.offsets) };
}

/** 4-bit blocks re-expressed as 8-bit blocks with the same scale (exact: q-8 fits in int8). */
export function widenTo8(w: NBitsWeight): NBitsWeight {
  if (w.bits === 8) return w;
  const data = new Uint8Array(w.data.length * 2);
  for (let i = 0; i < w.data.length; i++) {
    const byte = w.data[i]!;
    data[2 * i] = (byte & 15) - 8 + 128;
    data[2 * i + 1] = (byte >> 4) - 8 + 128;
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
