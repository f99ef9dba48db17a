/**
 * GGUF quant blocks as what they encode: per element an integer q, per sub-block of 16 or 32
 * elements a scale s and (some types) an offset a, the weight being s * q + a. s and a are the
 * products llama.cpp's dequantize_row_* form before multiplying by q (an fp16 times a small
 * integer), which float32 holds exactly; so these are the file's values, not an approximation.
 * Types whose blocks do not decompose so (every float type) have no entry.
 */
import { fp16ToFloat32 } from "../gguf/half.ts";
import { GgmlType, type GgmlTypeId } from "../gguf/types.ts";

export interface IntegerBlocks {
  /** Elements per scale (and offset). */
  subBlock: 16 | 32;
  /** Per element, in the tensor's element order. */
  q: Int8Array;
  /** Per sub-block. */
  scales: Float32Array;
  /** Per sub-block; absent for types without offsets. */
  offsets?: Float32Array;
  /** The range of q the type allows (whatever a given tensor holds). */
  min: number;
  max: number;
}

interface Decoder {
  superBlock: number;
  bytes: number;
  subBlock: 16 | 32;
  min: number;
  max: number;
  offsets: boolean;
  /** Decodes block `b` at byte `o` into q[e..], scales[s..], offsets[s..] (e, s: its first element and sub-block). */
  decode(src: Uint8Array, o: number, out: IntegerBlocks, e: number, s: number): void;
}

function half(src: Uint8Array, o: number): number {
  return fp16ToFloat32(src[o]! | (src[o + 1]! << 8));
}

function u32(src: Uint8Array, o: number): number {
  return (src[o]! | (src[o + 1]! << 8) | (src[o + 2]! << 16) | (src[o + 3]! << 24)) >>> 0;
}

/** get_scale_min_k4: the 8 six-bit (scale, min) pairs of Q4_K/Q5_K packed in 12 bytes at `s`. */
function scaleMinK4(src: Uint8Array, s: number, j: number): [number, number] {
  if (j < 4) return [src[s + j]! & 63, src[s + j + 4]! & 63];
  return [
    (src[s + j + 4]! & 15) | ((src[s + j - 4]! >> 6) << 4),
    (src[s + j + 4]! >> 4) | ((src[s + j]! >> 6) << 4),
  ];
}

/** Q4_K/Q5_K's 8 sub-block scales d*sc and offsets -(dmin*m), from the super-block at `o`. */
function scalesAndMinsK4(src: Uint8Array, o: number, out: IntegerBlocks, s: number): void {
  const d = half(src, o);
  const dmin = half(src, o + 2);
  for (let j = 0; j < 8; j++) {
    const [sc, m] = scaleMinK4(src, o + 4, j);
    out.scales[s + j] = d * sc;
    out.offsets![s + j] = -(dmin * m);
  }
}

/**
 * The 2-bit field of element i (of 256) that Q2_K stores, and Q3_K as its low bits: each 32-byte
 * half of qs (at `qs`) serves 128 elements, 2-bit field `shift` of byte l being element
 * 32 * (shift / 2) + l of that half.
 */
function twoBitField(src: Uint8Array, qs: number, i: number): number {
  return (src[qs + 32 * (i >> 7) + (i & 31)]! >> (2 * ((i >> 5) & 3))) & 3;
}

const DECODERS: Partial<Record<GgmlTypeId, Decoder>> = {
  // x = d * (q - 8); byte j holds elements j (low nibble) and j + 16.
  [GgmlType.Q4_0]: {
    superBlock: 32,
    bytes: 18,
    subBlock: 32,
    min: -8,
    max: 7,
    offsets: false,
    decode(src, o, out, e, s) {
      out.scales[s] = half(src, o);
      for (let j = 0; j < 16; j++) {
        out.q[e + j] = (src[o + 2 + j]! & 15) - 8;
        out.q[e + j + 16] = (src[o + 2 + j]! >> 4) - 8;
      }
    },
  },
  // x = d * q + m.
  [GgmlType.Q4_1]: {
    superBlock: 32,
    bytes: 20,
    subBlock: 32,
    min: 0,
    max: 15,
    offsets: true,
    decode(src, o, out, e, s) {
      out.scales[s] = half(src, o);
      out.offsets![s] = half(src, o + 2);
      for (let j = 0; j < 16; j++) {
        out.q[e + j] = src[o + 4 + j]! & 15;
        out.q[e + j + 16] = src[o + 4 + j]! >> 4;
      }
    },
  },
  // x = d * (q - 16); bit i of qh is element i's fifth bit.
  [GgmlType.Q5_0]: {
    superBlock: 32,
    bytes: 22,
    subBlock: 32,
    min: -16,
    max: 15,
    offsets: false,
    decode(src, o, out, e, s) {
      out.scales[s] = half(src, o);
      const qh = u32(src, o + 2);
      for (let j = 0; j < 16; j++) {
        const v = src[o + 6 + j]!;
        out.q[e + j] = ((v & 15) | (((qh >>> j) & 1) << 4)) - 16;
        out.q[e + j + 16] = ((v >> 4) | (((qh >>> (j + 16)) & 1) << 4)) - 16;
      }
    },
  },
  // x = d * q + m.
  [GgmlType.Q5_1]: {
    superBlock: 32,
    bytes: 24,
    subBlock: 32,
    min: 0,
    max: 31,
    offsets: true,
    decode(src, o, out, e, s) {
      out.scales[s] = half(src, o);
      out.offsets![s] = half(src, o + 2);
      const qh = u32(src, o + 4);
      for (let j = 0; j < 16; j++) {
        const v = src[o + 8 + j]!;
        out.q[e + j] = (v & 15) | (((qh >>> j) & 1) << 4);
        out.q[e + j + 16] = (v >> 4) | (((qh >>> (j + 16)) & 1) << 4);
      }
    },
  },
  // x = d * q.
  [GgmlType.Q8_0]: {
    superBlock: 32,
    bytes: 34,
    subBlock: 32,
    min: -128,
    max: 127,
    offsets: false,
    decode(src, o, out, e, s) {
      out.scales[s] = half(src, o);
      for (let j = 0; j < 32; j++) out.q[e + j] = (src[o + 2 + j]! << 24) >> 24;
    },
  },
  // x = (d * sc) * q - (dmin * m) per 32; 32-byte chunk c: sub-block 2c low nibbles, 2c + 1 high.
  [GgmlType.Q4_K]: {
    superBlock: 256,
    bytes: 144,
    subBlock: 32,
    min: 0,
    max: 15,
    offsets: true,
    decode(src, o, out, e, s) {
      scalesAndMinsK4(src, o, out, s);
      for (let c = 0; c < 4; c++) {
        const qs = o + 16 + 32 * c;
        for (let l = 0; l < 32; l++) {
          out.q[e + 64 * c + l] = src[qs + l]! & 15;
          out.q[e + 64 * c + 32 + l] = src[qs + l]! >> 4;
        }
      }
    },
  },
  // As Q4_K with a fifth bit: bit k of qh[l] for element l of sub-block k.
  [GgmlType.Q5_K]: {
    superBlock: 256,
    bytes: 176,
    subBlock: 32,
    min: 0,
    max: 31,
    offsets: true,
    decode(src, o, out, e, s) {
      scalesAndMinsK4(src, o, out, s);
      const qh = o + 16;
      for (let c = 0; c < 4; c++) {
        const qs = o + 48 + 32 * c;
        for (let l = 0; l < 32; l++) {
          const h = src[qh + l]!;
          out.q[e + 64 * c + l] = (src[qs + l]! & 15) | (((h >> (2 * c)) & 1) << 4);
          out.q[e + 64 * c + 32 + l] = (src[qs + l]! >> 4) | (((h >> (2 * c + 1)) & 1) << 4);
        }
      }
    },
  },
  // x = (d * sc) * (q - 32) per 16, sc int8; per 128-element half, element l + 32k: low nibble of
  // ql[l + 32 (k & 1)] (k < 2 low, else high), top bits 2k..2k+1 of qh[l].
  [GgmlType.Q6_K]: {
    superBlock: 256,
    bytes: 210,
    subBlock: 16,
    min: -32,
    max: 31,
    offsets: false,
    decode(src, o, out, e, s) {
      const d = half(src, o + 208);
      for (let j = 0; j < 16; j++) out.scales[s + j] = d * ((src[o + 192 + j]! << 24) >> 24);
      for (let n = 0; n < 2; n++) {
        const ql = o + 64 * n;
        const qh = o + 128 + 32 * n;
        const at = e + 128 * n;
        for (let l = 0; l < 32; l++) {
          const h = src[qh + l]!;
          const a = src[ql + l]!;
          const c = src[ql + l + 32]!;
          out.q[at + l] = ((a & 15) | ((h & 3) << 4)) - 32;
          out.q[at + l + 32] = ((c & 15) | (((h >> 2) & 3) << 4)) - 32;
          out.q[at + l + 64] = ((a >> 4) | (((h >> 4) & 3) << 4)) - 32;
          out.q[at + l + 96] = ((c >> 4) | (((h >> 6) & 3) << 4)) - 32;
        }
      }
    },
  },
  // x = (d * (sc - 32)) * q per 16, q = low 2 bits - (high bit clear ? 4 : 0): hmask[32], qs[64],
  // scales[12] (16 six-bit values), d.
  [GgmlType.Q3_K]: {
    superBlock: 256,
    bytes: 110,
    subBlock: 16,
    min: -4,
    max: 3,
    offsets: false,
    decode(src, o, out, e, s) {
      const d = half(src, o + 108);
      const sc = o + 96;
      for (let i = 0; i < 4; i++) {
        const hi = src[sc + 8 + i]!;
        const lo0 = src[sc + i]!;
        const lo1 = src[sc + 4 + i]!;
        out.scales[s + i] = d * (((lo0 & 15) | ((hi & 3) << 4)) - 32);
        out.scales[s + 4 + i] = d * (((lo1 & 15) | (((hi >> 2) & 3) << 4)) - 32);
        out.scales[s + 8 + i] = d * (((lo0 >> 4) | (((hi >> 4) & 3) << 4)) - 32);
        out.scales[s + 12 + i] = d * (((lo1 >> 4) | (((hi >> 6) & 3) << 4)) - 32);
      }
      // hmask bit (i / 32) of byte i % 32 is element i's high bit.
      for (let i = 0; i < 256; i++)
        out.q[e + i] = twoBitField(src, o + 32, i) - ((src[o + (i & 31)]! >> (i >> 5)) & 1 ? 0 : 4);
    },
  },
  // x = (d * (sc & 15)) * q - (dmin * (sc >> 4)) per 16, q 2-bit: scales[16], qs[64], d, dmin.
  [GgmlType.Q2_K]: {
    superBlock: 256,
    bytes: 84,
    subBlock: 16,
    min: 0,
    max: 3,
    offsets: true,
    decode(src, o, out, e, s) {
      const d = half(src, o + 80);
      const dmin = half(src, o + 82);
      for (let j = 0; j < 16; j++) {
        const sc = src[o + j]!;
        out.scales[s + j] = d * (sc & 15);
        out.offsets![s + j] = -(dmin * (sc >> 4));
      }
      for (let i = 0; i < 256; i++) out.q[e + i] = twoBitField(src, o + 16, i);
    },
  },
};

/** The types integerBlocks decomposes. */
export function hasIntegerBlocks(type: GgmlTypeId): boolean {
  return DECODERS[type] !== undefined;
}

/** `count` elements of `type` as integers and sub-block scales; undefined for other types. */
export function integerBlocks(type: GgmlTypeId, src: Uint8Array, count: number): IntegerBlocks | undefined {
  const decoder = DECODERS[type];
  if (!decoder) return undefined;
  if (count % decoder.superBlock !== 0)
    throw new Error(`${count} elements are not whole blocks of ${decoder.superBlock}`);
  const blocks = count / decoder.superBlock;
  if (src.length < blocks * decoder.bytes)
    throw new Error(`${src.length} bytes hold fewer than ${count} elements`);
  const subs = count / decoder.subBlock;
  const out: IntegerBlocks = {
    subBlock: decoder.subBlock,
    q: new Int8Array(count),
    scales: new Float32Array(subs),
    offsets: decoder.offsets ? new Float32Array(subs) : undefined,
    min: decoder.min,
    max: decoder.max,
  };
  const subsPerBlock = decoder.superBlock / decoder.subBlock;
  for (let b = 0; b < blocks; b++)
    decoder.decode(src, b * decoder.bytes, out, b * decoder.superBlock, b * subsPerBlock);
  return out;
}
