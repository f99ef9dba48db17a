/**
 * ortserve.BlockQuantMatMul (native/src/block-quant-matmul.cc) against the converter's projections
 * it replaces, on graphs that hold nothing else: a Q4_1-style 4-bit projection with its offset
 * term (MatMulNBits with block-sum rows, Split, MatMul, Add), a plain 4-bit one and an 8-bit one,
 * and the 4-bit ones followed by the MLP's SwiGLU (Split, Sigmoid, Mul, Mul).
 * The native session runs the rewrite; three references:
 * - the same arithmetic in JavaScript (int8 activations per block of 32, or for K-quant weights
 *   per 256 as llama.cpp's Q8_K, integer dot products, float accumulation over blocks): within
 *   float rounding;
 * - the exact product of x and the dequantized weights: within the int8 activations' error;
 * - onnxruntime-node running the graph as written (MatMulNBits' own int8 path): ours is no
 *   further from the exact product than it is.
 * The kernel's portable loop gives the vector kernel's floats exactly. Scales and offsets that are
 * all half values (GGUF's) are packed as half, and give the float-packed weights' floats exactly.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InferenceSession, Tensor } from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeModel, withCachedAttention } from "../../src/core/runner/attention-graph.ts";
import {
  ACTIVATION_BLOCKS_METADATA,
  QUANT_MATMUL_GEGLU_OP,
  QUANT_MATMUL_OFFSET_GEGLU_OP,
  QUANT_MATMUL_OFFSET_OP,
  QUANT_MATMUL_OFFSET_SWIGLU_OP,
  QUANT_MATMUL_OP,
  QUANT_MATMUL_SWIGLU_OP,
} from "../../src/core/runner/epilogue-graph.ts";
import { nativeSessions } from "../../src/core/runner/native-session.ts";
import { tanhGeluFp16Table } from "../../src/models/convert/decoder-graph.ts";
import { ExternalDataFile, GraphBuilder } from "../../src/models/convert/onnx/graph-builder.ts";
import { OnnxDataType } from "../../src/models/convert/onnx/proto.ts";
import {
  concatNBits,
  type NBitsWeight,
  offsetMatrix,
  withBlockSumRows,
} from "../../src/models/convert/quantized-weights.ts";
import { ggmlGelu } from "../fixtures/ggml-gelu.ts";
import { relativeGap } from "./relative-gap.ts";
import { runAll } from "./run-all.ts";

const F = OnnxDataType.FLOAT;
// 5 blocks of 32 unless a case says otherwise (K-quant cases: whole super-blocks of 256).
const K = 160;

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

type Meta = "float" | "half" | "coded";

/**
 * Random weights. Scales and offsets: any float; with "half", binary16 values (as GGUF's Q4_1 and
 * Q8_0 store them); with "coded", per column and super-block of 256 inputs an fp16 factor times
 * small integers (as K-quants store them: Q6_K's signed 8-bit scales, Q4_K's 6-bit scale and min).
 * With scale blocks of 16 (GGUF's Q6_K and Q3_K sub-blocks), each half of a block of 32 has its
 * own scale, and the two halves the same offset (as the converter's stacks repeat Q4_K's), or
 * with `offsetBlock` 16 their own offsets too (GGUF's Q2_K). `lowBits`: 4-bit quants all in 4..11
 * (3: Q3_K's q + 8, as the converter stores them) or all in 8..11 (2: Q2_K's, likewise); 5: 8-bit
 * quants in 112..143 (Q5_0's q + 128, as stored) or, with offsets, 128..159 (Q5_1's, Q5_K's).
 */
function weight(
  bits: 4 | 8,
  withOffsets: boolean,
  n: number,
  seed: number,
  meta: Meta,
  scaleBlock: 16 | 32 = 32,
  k = K,
  fold = 0,
  sixBit = false,
  offsetBlock: 16 | 32 = 32,
  lowBits: 0 | 2 | 3 | 5 = 0,
  fourBitCodes = false,
): NBitsWeight {
  const next = lcg(seed);
  const blocks = n * (k / 32);
  // sixBit: 8-bit quants within 32 of the zero point 128, as the converter stores Q6_K's.
  const nibble = () => (lowBits === 3 ? 4 : 8) + Math.floor(next() * (lowBits === 3 ? 8 : 4));
  const data = Uint8Array.from({ length: (blocks * 32 * bits) / 8 }, () =>
    lowBits === 5
      ? (withOffsets ? 128 : 112) + Math.floor(next() * 32)
      : sixBit
        ? 96 + Math.floor(next() * 64)
        : lowBits
          ? nibble() | (nibble() << 4)
          : Math.floor(next() * 256),
  );
  const perBlock = 32 / scaleBlock;
  // Factors per (column, super-block), redrawn at each super-block's first value.
  const perSuper = (k / 32) * perBlock;
  let factor = 0;
  const value = (i: number, perSuperBlock: number, magnitude: number, signed: boolean, q6k = false) => {
    if (meta === "half")
      return Math.f16round(signed ? (next() - 0.5) * magnitude : 0.01 + next() * magnitude);
    if (meta === "float") return signed ? (next() - 0.5) * magnitude : 0.01 + next() * magnitude;
    const first = i % (perSuperBlock / (k / 256)) === 0;
    if (first) factor = Math.f16round((0.5 + next()) * (magnitude / 40));
    // Q2_K's: scales d * sc, offsets -dmin * m, sc and m 4-bit.
    if (fourBitCodes) return factor * (signed ? -Math.floor(next() * 16) : 1 + Math.floor(next() * 15));
    // Q6_K's scales: int8, the super-block's largest -128 (as llama.cpp's quantizer makes them).
    if (q6k) return (factor / 4) * (first ? -128 : Math.floor(next() * 255) - 127 || 1);
    // Scales from 1 (the JavaScript reference recovers q by dividing by them), offsets from -32.
    return factor * (signed ? Math.floor(next() * 64) - 32 : 1 + Math.floor(next() * 63));
  };
  const q6k = isQ6kScales(bits, scaleBlock, withOffsets);
  const scales = Float32Array.from({ length: blocks * perBlock }, (_, i) =>
    value(i, perSuper, 0.05, false, q6k),
  );
  // `fold`: the converter's Q4_K and Q2_K offsets, the nibbles' zero point folded in (a + 8 * scale).
  const offsetsPerBlock = 32 / offsetBlock;
  const offsets = withOffsets
    ? Float32Array.from(
        Array.from(
          { length: blocks * offsetsPerBlock },
          (_, i) =>
            value(i, (k / 32) * offsetsPerBlock, 0.4, true) +
            fold * scales[Math.floor(i / offsetsPerBlock) * perBlock + (i % offsetsPerBlock)]!,
        ).flatMap((o) => Array.from({ length: perBlock / offsetsPerBlock }, () => o)),
      )
    : undefined;
  return { bits, blockSize: scaleBlock, n, k, data, scales, offsets };
}

/** Whether `weight` draws a weight's coded scales as Q6_K's (int8): 8-bit, per 16, no offsets. */
function isQ6kScales(bits: number, scaleBlock: number, withOffsets: boolean): boolean {
  return bits === 8 && scaleBlock === 16 && !withOffsets;
}

/**
 * The bytes BlockQuantMatMul packs a weight into: per 16 columns and block of 32 inputs the quants,
 * then 16 scales (and offsets), 2 bytes each when half, else 4; half scales without offsets go
 * after pairs of blocks (64 bytes, keeping the quants 64-byte aligned).
 */
function packedBytes(w: NBitsWeight, meta: Meta, fourBitCodes = false): number {
  const blocks = w.k / 32;
  // 8-bit quants in 112..143 or 128..159 are packed in 5 bits, within 32 of the zero point in 6;
  // 4-bit ones all in 8..11 in 2, all in 4..11 in 3.
  const nibbles = w.bits === 4 ? [...w.data].flatMap((b) => [b & 15, b >> 4]) : [];
  const bits =
    w.bits === 8 && (w.data.every((q) => q >= 112 && q < 144) || w.data.every((q) => q >= 128 && q < 160))
      ? 5
      : w.bits === 8 && w.data.every((q) => q >= 96 && q < 160)
        ? 6
        : w.bits === 4 && nibbles.every((q) => q >= 8 && q < 12)
          ? 2
          : w.bits === 4 && nibbles.every((q) => q >= 4 && q < 12)
            ? 3
            : w.bits;
  const quantBytes = (16 * 32 * bits) / 8;
  const values = 32 / w.blockSize + (w.offsets ? (offsetsPerHalf(w) ? 2 : 1) : 0);
  if (meta === "coded") {
    // Super-blocks of 8 blocks: their quants, a code per value, 16 half factors per kind. The
    // codes `weight` draws fit 4 bits (fourBitCodes), 6 (0..63 or -32..31, kept for 3- to 5-bit
    // quants) or, Q6_K's, 8.
    const codeBytes = fourBitCodes
      ? 0.5
      : bits >= 3 && bits <= 5 && !isQ6kScales(w.bits, w.blockSize, w.offsets !== undefined)
        ? 0.75
        : 1;
    const superBytes = 8 * (quantBytes + 16 * codeBytes * values) + 32 * (w.offsets ? 2 : 1);
    return Math.ceil(w.n / 16) * (blocks / 8) * Math.ceil(superBytes / 64) * 64;
  }
  const metaBytes = (meta === "half" ? 2 : 4) * 16 * values;
  // Blocks whose metadata is not a multiple of 64 bytes go in pairs, keeping the quants aligned.
  const slots = metaBytes % 64 !== 0 ? 2 * Math.ceil(blocks / 2) : blocks;
  return Math.ceil(w.n / 16) * slots * (quantBytes + metaBytes);
}

/** Whether the halves of some block of 32 carry different offsets (the kernel then adds one a half). */
function offsetsPerHalf(w: NBitsWeight): boolean {
  return (
    w.blockSize === 16 &&
    w.offsets !== undefined &&
    w.offsets.some((o, i) => i % 2 === 1 && o !== w.offsets![i - 1])
  );
}

/** Weight (column, input) as the converter means it: scale * (q - zero point) + offset. */
function dequantized(w: NBitsWeight, column: number, j: number): number {
  const blocks = w.k / 32;
  const b = Math.floor(j / 32);
  const at = column * blocks + b;
  const within = j % 32;
  const q =
    w.bits === 8
      ? w.data[at * 32 + within]! - 128
      : (within % 2 === 0 ? w.data[at * 16 + within / 2]! & 15 : w.data[at * 16 + (within >> 1)]! >> 4) - 8;
  const meta = scaleIndex(w, column, j);
  return w.scales[meta]! * q + (w.offsets?.[meta] ?? 0);
}

/** Where input j's scale (and offset) sits for output `column`. */
function scaleIndex(w: NBitsWeight, column: number, j: number): number {
  return column * (w.k / w.blockSize) + Math.floor(j / w.blockSize);
}

function exactProduct(w: NBitsWeight, x: Float32Array, rows: number): Float32Array {
  const N = w.n;
  const out = new Float32Array(rows * N);
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < N; c++) {
      let acc = 0;
      for (let j = 0; j < w.k; j++) acc += x[r * w.k + j]! * dequantized(w, c, j);
      out[r * N + c] = acc;
    }
  return out;
}

const roundHalfEven = (t: number) => {
  const r = Math.round(t);
  return Math.abs(t % 1) === 0.5 ? 2 * Math.round(t / 2) : r;
};

/**
 * The kernel's arithmetic: int8 activations per block (of 32, or with activationBlock 256 one scale
 * per 256 inputs as llama.cpp's quantize_row_q8_K_ref: 1 / (127 / max), its sign aside), integer
 * dots, float32 accumulation.
 */
function int8Product(w: NBitsWeight, x: Float32Array, rows: number): Float32Array {
  const f = Math.fround;
  const K = w.k;
  const blocks = K / 32;
  const zero = w.bits === 8 ? 128 : 8;
  const N = w.n;
  const perHalf = offsetsPerHalf(w);
  const out = new Float32Array(rows * N);
  for (let r = 0; r < rows; r++) {
    const xq = new Int32Array(K);
    const scale = new Float32Array(blocks);
    const sum = new Int32Array(blocks);
    const lowSum = new Int32Array(blocks);
    const span = w.activationBlock ?? 32;
    for (let b = 0; b < blocks; b++) {
      const from = Math.floor((b * 32) / span) * span;
      let amax = 0;
      for (let j = from; j < from + span; j++) amax = Math.max(amax, Math.abs(x[r * K + j]!));
      const inv = amax > 0 ? f(127 / amax) : 0;
      for (let j = 0; j < 32; j++) {
        const q = Math.max(-127, Math.min(127, roundHalfEven(f(x[r * K + b * 32 + j]! * inv))));
        xq[b * 32 + j] = q;
        sum[b] += q;
        if (j < 16) lowSum[b] += q;
      }
      scale[b] = span === 32 ? f(amax / 127) : inv > 0 ? f(1 / inv) : 0;
    }
    for (let c = 0; c < N; c++) {
      let acc = 0;
      for (let b = 0; b < blocks; b++) {
        // Each scale's run of inputs (the whole block, or its halves in turn) is one term.
        for (let from = 0; from < 32; from += w.blockSize) {
          let dot = 0;
          for (let j = from; j < from + w.blockSize; j++) {
            const at = scaleIndex(w, c, b * 32 + j);
            const q =
              Math.round((dequantized(w, c, b * 32 + j) - (w.offsets?.[at] ?? 0)) / w.scales[at]!) + zero;
            dot += (q - zero) * xq[b * 32 + j]!;
          }
          acc = f(dot * f(w.scales[scaleIndex(w, c, b * 32 + from)]! * scale[b]!) + acc);
        }
        if (perHalf) {
          // Each half's offset times dx and the sum of its 16 quantized inputs, the first half first.
          acc = f(w.offsets![scaleIndex(w, c, b * 32)]! * f(scale[b]! * lowSum[b]!) + acc);
          acc = f(w.offsets![scaleIndex(w, c, b * 32 + 16)]! * f(scale[b]! * (sum[b]! - lowSum[b]!)) + acc);
        } else if (w.offsets) acc = f(w.offsets[scaleIndex(w, c, b * 32)]! * f(scale[b]! * sum[b]!) + acc);
      }
      out[r * N + c] = acc;
    }
  }
  return out;
}

type Glu = "swiglu" | "geglu";

/** silu(gate) * up, or gelu(gate) * up with ggml's GELU table, over each row's halves. */
function gated(glu: Glu, y: Float32Array, rows: number, N: number): Float32Array {
  const half = N / 2;
  const out = new Float32Array(rows * half);
  const activation = glu === "swiglu" ? (g: number) => g / (1 + Math.exp(-g)) : ggmlGelu;
  for (let r = 0; r < rows; r++)
    for (let j = 0; j < half; j++) out[r * half + j] = activation(y[r * N + j]!) * y[r * N + half + j]!;
  return out;
}

/** x [rows, K] → the converter's projection → y [rows, N], or [rows, N / 2] after a SwiGLU or GeGLU. */
function writeGraph(dir: string, name: string, w: NBitsWeight, glu: Glu | undefined): string {
  const N = w.n;
  const external = new ExternalDataFile(join(dir, `${name}.onnx_data`));
  const g = new GraphBuilder(external);
  const K = w.k;
  const x = g.input("x", F, ["rows", K]);
  const blocks = K / w.blockSize;
  const stored = w.offsets ? withBlockSumRows(w) : w;
  const data = g.initializer(
    "qweight",
    OnnxDataType.UINT8,
    [stored.n, blocks, (w.blockSize * w.bits) / 8],
    stored.data,
  );
  const scales = g.initializer("scales", F, [stored.n, blocks], stored.scales);
  const attrs = { K, N: stored.n, bits: w.bits, block_size: w.blockSize, accuracy_level: 4 };
  const projection = glu ? "gate_up" : "y";
  if (!w.offsets) {
    g.node("MatMulNBits", [x, data, scales], [projection], attrs, "com.microsoft");
  } else {
    const both = g.op("MatMulNBits", [x, data, scales], "both", attrs, "com.microsoft");
    const [y, sums] = g.node("Split", [both, g.int64s([N, blocks])], ["p", "sums"], { axis: -1 });
    const offsets = g.initializer("offsets", F, [blocks, N], offsetMatrix(w));
    g.node("Add", [y!, g.op("MatMul", [sums!, offsets], "corr")], [projection]);
  }
  if (glu) {
    const [gate, up] = g.node("Split", [projection, g.int64s([N / 2, N / 2])], ["gate", "up"], { axis: -1 });
    const activated =
      glu === "swiglu"
        ? g.op("Mul", [gate!, g.op("Sigmoid", [gate!], "sigmoid")], "silu")
        : tanhGeluFp16Table(g, "mlp", gate!);
    g.node("Mul", [activated, up!], ["y"]);
  }
  g.output("y", F, ["rows", glu ? N / 2 : N]);
  external.close();
  const path = join(dir, `${name}.onnx`);
  // The converter's record of the weights' activation block (K-quants: 256).
  const metadata = w.activationBlock
    ? { [ACTIVATION_BLOCKS_METADATA]: JSON.stringify({ qweight: w.activationBlock }) }
    : undefined;
  writeFileSync(path, g.encode({ producerVersion: "test", metadata }));
  return path;
}

/** GGUF's Q2_K as the converter stores it: 4-bit, scales and offsets per 16 inputs. */
const Q2_K_FORM = { bits: 4, offsets: true, scaleBlock: 16, offsetBlock: 16 } as const;
/** Q3_K as the converter stores it: 4-bit quants in 4..11, scales per 16. */
const Q3_K_STORED = { bits: 4, offsets: false, scaleBlock: 16, lowBits: 3 } as const;
/** An 8-bit gate/up projection with scales per 16 and its SwiGLU (Q6_K's form). */
const SWIGLU_PER_16 = {
  bits: 8,
  offsets: false,
  n: 256,
  glu: "swiglu",
  op: QUANT_MATMUL_SWIGLU_OP,
  scaleBlock: 16,
} as const;

describe.skipIf(!nativeSessions?.blockQuantMatMul)("ortserve.BlockQuantMatMul", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "ortserve-quant-matmul-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  // 200 columns: not a whole number of 16-column tiles; 256: gate and up halves of whole tiles.
  const cases = [
    { name: "Q4_1", bits: 4, offsets: true, n: 200, op: QUANT_MATMUL_OFFSET_OP },
    { name: "Q4_0", bits: 4, offsets: false, n: 200, op: QUANT_MATMUL_OP },
    { name: "Q8_0", bits: 8, offsets: false, n: 200, op: QUANT_MATMUL_OP },
    {
      name: "Q4_1 + SwiGLU",
      bits: 4,
      offsets: true,
      n: 256,
      glu: "swiglu",
      op: QUANT_MATMUL_OFFSET_SWIGLU_OP,
    },
    { name: "Q4_0 + SwiGLU", bits: 4, offsets: false, n: 256, glu: "swiglu", op: QUANT_MATMUL_SWIGLU_OP },
    {
      name: "Q4_1 + SwiGLU, halves across a tile",
      bits: 4,
      offsets: true,
      n: 200,
      glu: "swiglu",
      op: QUANT_MATMUL_OFFSET_SWIGLU_OP,
    },
    { name: "Q5_1", bits: 8, offsets: true, n: 200, op: QUANT_MATMUL_OFFSET_OP },
    // Scales per 16 inputs: Q6_K (8-bit), Q3_K (4-bit), and a Q/K/V stack of Q4_K and Q6_K rows
    // (8-bit, scales per 16, offsets per 32).
    { name: "Q6_K", bits: 8, offsets: false, n: 200, op: QUANT_MATMUL_OP, scaleBlock: 16 },
    { name: "Q3_K", bits: 4, offsets: false, n: 200, op: QUANT_MATMUL_OP, scaleBlock: 16 },
    // Offsets per 16 inputs too: Q2_K.
    { name: "Q2_K", ...Q2_K_FORM, n: 200, op: QUANT_MATMUL_OFFSET_OP },
    {
      name: "Q4_K + Q6_K stack",
      bits: 8,
      offsets: true,
      n: 200,

      op: QUANT_MATMUL_OFFSET_OP,
      scaleBlock: 16,
    },
    { name: "Q6_K + SwiGLU", ...SWIGLU_PER_16 },
    // K-quants' super-block scales (coded): Q4_K, Q6_K and their stack, over 2 super-blocks, with
    // the converter's Q8_K activations (q8k); Q4_K also with activations per 32, as a stack with a
    // 32-element type (Q5_0) takes them.
    { name: "Q4_K", bits: 4, offsets: true, n: 200, op: QUANT_MATMUL_OFFSET_OP, k: 512 },
    {
      name: "Q4_K as converted (zero point in the offsets)",
      bits: 4,
      offsets: true,
      n: 200,

      op: QUANT_MATMUL_OFFSET_OP,
      k: 512,
      q8k: true,
      fold: 8,
    },
    {
      name: "Q6_K",
      bits: 8,
      offsets: false,
      n: 200,

      op: QUANT_MATMUL_OP,
      scaleBlock: 16,
      k: 512,
      q8k: true,
    },
    {
      name: "Q4_K + Q6_K stack",
      bits: 8,
      offsets: true,
      n: 200,

      op: QUANT_MATMUL_OFFSET_OP,
      scaleBlock: 16,
      k: 512,
      q8k: true,
    },
    // Q2_K as converted: the zero point in the offsets, coded scales and offsets.
    { name: "Q2_K", ...Q2_K_FORM, n: 200, op: QUANT_MATMUL_OFFSET_OP, k: 512, fold: 8, q8k: true },
    {
      name: "Q2_K + SwiGLU",
      ...Q2_K_FORM,
      n: 256,
      glu: "swiglu",
      op: QUANT_MATMUL_OFFSET_SWIGLU_OP,
      k: 512,
      q8k: true,
      fold: 8,
    },
    // Q6_K's quants as the converter stores them (within 32 of 128): packed in 6 bits.
    {
      name: "Q6_K in 6 bits",
      bits: 8,
      offsets: false,
      n: 200,

      op: QUANT_MATMUL_OP,
      scaleBlock: 16,
      k: 512,
      q8k: true,
      sixBit: true,
    },
    { name: "6-bit + SwiGLU", ...SWIGLU_PER_16, sixBit: true },
    {
      name: "6-bit with offsets",
      bits: 8,
      offsets: true,
      n: 200,

      op: QUANT_MATMUL_OFFSET_OP,
      sixBit: true,
    },
    // Q3_K's and Q2_K's quants as the converter stores them (q + 8: 4..11, 8..11): packed in 3 and 2 bits.
    { name: "Q3_K in 3 bits", ...Q3_K_STORED, n: 200, op: QUANT_MATMUL_OP },
    { name: "Q3_K in 3 bits", ...Q3_K_STORED, n: 200, op: QUANT_MATMUL_OP, k: 512, q8k: true },
    { name: "3-bit + SwiGLU", ...Q3_K_STORED, n: 256, glu: "swiglu", op: QUANT_MATMUL_SWIGLU_OP },
    { name: "Q2_K in 2 bits", ...Q2_K_FORM, n: 200, op: QUANT_MATMUL_OFFSET_OP, lowBits: 2 },
    // The 5-bit types' quants as stored (112..143; with offsets 128..159): packed in 5 bits.
    { name: "Q5_0 in 5 bits", bits: 8, offsets: false, n: 200, op: QUANT_MATMUL_OP, lowBits: 5 },
    { name: "Q5_1 in 5 bits", bits: 8, offsets: true, n: 200, op: QUANT_MATMUL_OFFSET_OP, lowBits: 5 },
    {
      name: "Q5_K in 5 bits",
      bits: 8,
      offsets: true,
      n: 200,
      op: QUANT_MATMUL_OFFSET_OP,
      k: 512,
      q8k: true,
      lowBits: 5,
    },
    { name: "5-bit + SwiGLU, scales per 16", ...SWIGLU_PER_16, lowBits: 5 },
    {
      name: "Q2_K in 2 bits",
      ...Q2_K_FORM,
      n: 200,
      op: QUANT_MATMUL_OFFSET_OP,
      k: 512,
      q8k: true,
      lowBits: 2,
    },
    // Q2_K's 4-bit sub-block scale and min codes, kept in 4 bits; with the zero point folded in too.
    ...[0, 8].map((fold) => ({
      name: `Q2_K in 2 bits, 4-bit codes${fold ? ", zero point in the offsets" : ""}`,
      ...Q2_K_FORM,
      n: 200,
      op: QUANT_MATMUL_OFFSET_OP,
      k: 512,
      q8k: true,
      lowBits: 2 as const,
      fourBitCodes: true,
      fold,
    })),
    // GeGLU (Gemma's MLP): 4- and 8-bit blocks, with offsets, and K-quants' coded scales.
    { name: "Q4_1 + GeGLU", bits: 4, offsets: true, n: 256, glu: "geglu", op: QUANT_MATMUL_OFFSET_GEGLU_OP },
    { name: "Q5_0 + GeGLU", bits: 8, offsets: false, n: 256, glu: "geglu", op: QUANT_MATMUL_GEGLU_OP },
    {
      name: "Q4_K + GeGLU",
      bits: 4,
      offsets: true,
      n: 256,
      glu: "geglu",
      op: QUANT_MATMUL_OFFSET_GEGLU_OP,
      k: 512,
    },
  ] as const;
  for (const [i, c] of cases.entries())
    for (const meta of "k" in c ? (["coded"] as const) : (["float", "half"] as const))
      it(`replaces the converter's ${c.name} projection and computes it (${meta} scales${"q8k" in c ? ", Q8_K activations" : ""})`, async () => {
        const { bits, offsets, n, op } = c;
        const glu = "glu" in c ? c.glu : undefined;
        const k = "k" in c ? c.k : K;
        const w = weight(
          bits,
          offsets,
          n,
          11 + i,
          meta,
          "scaleBlock" in c ? c.scaleBlock : 32,
          k,
          "fold" in c ? c.fold : 0,
          "sixBit" in c && c.sixBit,
          "offsetBlock" in c ? c.offsetBlock : 32,
          "lowBits" in c ? c.lowBits : 0,
          "fourBitCodes" in c,
        );
        if ("q8k" in c) w.activationBlock = 256;
        const half = meta !== "float";
        const path = writeGraph(dir, `g${i}`, w, glu);
        const finish = (y: Float32Array, rows: number) => (glu ? gated(glu, y, rows, n) : y);
        const rewritten = withCachedAttention(readFileSync(path), { quantMatMul: true })!;
        expect(describeModel(rewritten).nodes.map((n) => n.opType)).toEqual([op]);
        const asWritten = await InferenceSession.create(path, { intraOpNumThreads: 2 });
        const open = (model: string) =>
          nativeSessions!.create(model, { intraOpThreads: 2, interOpThreads: 1, cachedAttention: true });
        const ours = open(path);
        expect(ours.packedWeightBytes).toBe(packedBytes(w, meta, "fourBitCodes" in c));
        // The same weights but column 0's first scale off the half grid (and any factor's): packed
        // as float.
        const floatScales = Float32Array.from(w.scales);
        floatScales[0] = floatScales[0]! * (1 + 2 ** -11);
        const floatPacked = { ...w, scales: floatScales };
        const asFloat = half ? open(writeGraph(dir, `g${i}-float`, floatPacked, glu)) : undefined;
        if (asFloat) expect(asFloat.packedWeightBytes).toBe(packedBytes(w, "float"));
        try {
          // A decode step (inline), row groups of 8 with a remainder, a prefill chunk (threaded).
          for (const rows of [1, 3, 13, 300]) {
            const next = lcg(rows * 7 + i);
            const x = Float32Array.from({ length: rows * k }, () => (next() - 0.5) * 4);
            const feeds = { x: new Tensor("float32", x, [rows, k]) };
            const got = (await runAll(ours, feeds)).y!;
            expect(got.dims).toEqual([rows, glu ? n / 2 : n]);
            const gotData = got.data as Float32Array;
            if (asFloat) {
              // Every output but column 0 (the one whose scale differs) the same floats.
              const floats = (await runAll(asFloat, feeds)).y!.data as Float32Array;
              const width = glu ? n / 2 : n;
              const others = (y: Float32Array) => y.filter((_, j) => j % width !== 0);
              expect(others(floats)).toEqual(others(gotData));
              const column0 = (y: Float32Array) => y.filter((_, j) => j % width === 0);
              // (The GELU table's binary16 steps can absorb so small a change.)
              if (glu !== "geglu") expect(column0(floats)).not.toEqual(column0(gotData));
            }
            expect(relativeGap(finish(int8Product(w, x, rows), rows), gotData)).toBeLessThan(1e-5);
            // The activation block reaches the kernel: activations per 32 would give other floats.
            if (w.activationBlock) {
              const per32 = finish(int8Product({ ...w, activationBlock: undefined }, x, rows), rows);
              expect(relativeGap(per32, gotData)).toBeGreaterThan(1e-4);
            }
            const exact = finish(exactProduct(w, x, rows), rows);
            const theirs = (await asWritten.run(feeds)).y!.data as Float32Array;
            const ourError = relativeGap(exact, gotData);
            expect(ourError).toBeLessThan(2e-2);
            // With scales per 16, MatMulNBits quantizes the activations per 16 too (ours: per 32).
            expect(ourError).toBeLessThanOrEqual(relativeGap(exact, theirs) * (w.blockSize === 16 ? 2 : 1.5));
            // Every kernel this CPU runs (AVX2 for CPUs without AVX-512 VNNI, the portable loop for
            // those without either) adds in the same order: the same floats. The scalar loop is
            // slow, so it takes the smaller cases only.
            const best = nativeSessions!.blockQuantMatMulKernels[0]!;
            for (const kernel of nativeSessions!.blockQuantMatMulKernels.slice(1)) {
              if (kernel === "scalar" && rows > 13) continue;
              expect(nativeSessions!.setBlockQuantMatMulKernel(kernel)).toBe(kernel);
              try {
                expect((await runAll(ours, feeds)).y!.data, kernel).toEqual(gotData);
              } finally {
                expect(nativeSessions!.setBlockQuantMatMulKernel(best)).toBe(best);
              }
            }
          }
        } finally {
          await asWritten.release();
          await ours.release();
          await asFloat?.release();
        }
      });

  // The converter stacks Q, K and V in the widest form any part needs (concatNBits): Q4_K_M's Q4_K
  // Q and K beside a Q6_K V come all 8-bit with scales per 16, the V's offsets zero. The kernel
  // packs each part in its own form again: the stack reads the parts' bytes, and gives each part's
  // floats.
  for (const meta of ["half", "coded"] as const)
    it(`packs a stack of a Q4_K and a Q6_K part each in its own form (${meta} scales)`, async () => {
      const k = meta === "coded" ? 512 : K;
      const q4k = weight(4, true, 64, 101, meta, 32, k);
      const q6k = weight(8, false, 48, 102, meta, 16, k, 0, true);
      const stack = concatNBits([q4k, q6k]);
      expect([stack.bits, stack.blockSize]).toEqual([8, 16]);
      const sessions = [q4k, q6k, stack].map((w, j) =>
        nativeSessions!.create(writeGraph(dir, `stack-${meta}-${j}`, w, undefined), {
          intraOpThreads: 2,
          interOpThreads: 1,
          cachedAttention: true,
        }),
      );
      const stacked = sessions[2];
      try {
        expect(stacked!.packedWeightBytes).toBe(packedBytes(q4k, meta) + packedBytes(q6k, meta));
        expect(stacked!.packedWeightBytes).toBeLessThan(packedBytes(stack, meta));
        for (const rows of [1, 3, 13]) {
          const next = lcg(rows + 500);
          const x = Float32Array.from({ length: rows * k }, () => (next() - 0.5) * 4);
          const feeds = { x: new Tensor("float32", x, [rows, k]) };
          const [a, b, both] = await Promise.all(
            sessions.map(async (s) => (await runAll(s, feeds)).y!.data as Float32Array),
          );
          const joined = new Float32Array(rows * stack.n);
          for (let r = 0; r < rows; r++) {
            joined.set(a!.subarray(r * q4k.n, (r + 1) * q4k.n), r * stack.n);
            joined.set(b!.subarray(r * q6k.n, (r + 1) * q6k.n), r * stack.n + q4k.n);
          }
          expect(both).toEqual(joined);
        }
      } finally {
        for (const s of sessions) await s.release();
      }
    });

  // A matrix of 4M weights or more is packed over several threads (one per core), tiles and scale
  // codes split between them: it must pack and multiply exactly as its column slices, each small
  // enough to be packed on one thread, do.
  it("packs a large matrix over several threads as its slices on one", async () => {
    const k = 1024;
    const big = weight(4, true, 4096, 77, "coded", 32, k, 8);
    const blocks = k / 32;
    const slice = (c0: number, width: number): NBitsWeight => ({
      ...big,
      n: width,
      data: big.data.slice(c0 * blocks * 16, (c0 + width) * blocks * 16),
      scales: big.scales.slice(c0 * blocks, (c0 + width) * blocks),
      offsets: big.offsets!.slice(c0 * blocks, (c0 + width) * blocks),
    });
    const parts = [0, 1, 2, 3].map((i) => slice(i * 1024, 1024));
    const sessions = [big, ...parts].map((w, j) =>
      nativeSessions!.create(writeGraph(dir, `threads-${j}`, w, undefined), {
        intraOpThreads: 2,
        interOpThreads: 1,
        cachedAttention: true,
      }),
    );
    try {
      expect(sessions[0]!.packedWeightBytes).toBe(packedBytes(big, "coded"));
      const rows = 2;
      const next = lcg(91);
      const x = Float32Array.from({ length: rows * k }, () => (next() - 0.5) * 4);
      const feeds = { x: new Tensor("float32", x, [rows, k]) };
      const [whole, ...pieces] = await Promise.all(
        sessions.map(async (s) => (await runAll(s, feeds)).y!.data as Float32Array),
      );
      const joined = new Float32Array(rows * big.n);
      for (let r = 0; r < rows; r++)
        for (const [i, p] of pieces.entries())
          joined.set(p!.subarray(r * 1024, (r + 1) * 1024), r * big.n + i * 1024);
      expect(whole).toEqual(joined);
    } finally {
      for (const s of sessions) await s.release();
    }
  });

  // ORTSERVE_BLOCK_QUANT_MATMUL names a kernel to run (measuring an older CPU's on a newer one);
  // a name this CPU does not run is said, not silently ignored.
  it("takes its kernel from ORTSERVE_BLOCK_QUANT_MATMUL", () => {
    const inUse = (setting: string) => {
      const run = spawnSync(
        process.execPath,
        [
          "--input-type=module",
          "-e",
          `const { nativeSessions } = await import(${JSON.stringify(new URL("../../src/core/runner/native-session.ts", import.meta.url).href)});
           process.stdout.write(nativeSessions.blockQuantMatMulKernel());`,
        ],
        { env: { ...process.env, ORTSERVE_BLOCK_QUANT_MATMUL: setting }, encoding: "utf8" },
      );
      return { kernel: run.stdout, stderr: run.stderr };
    };
    const kernels = nativeSessions!.blockQuantMatMulKernels;
    const best = kernels[0];
    expect(inUse("1").kernel).toBe(best);
    // Each kernel this CPU runs (only the portable one where it lacks AVX2), by name.
    for (const kernel of kernels) expect(inUse(kernel).kernel).toBe(kernel);
    const unknown = inUse("avx9000");
    expect(unknown.kernel).toBe(best);
    expect(unknown.stderr).toContain("ORTSERVE_BLOCK_QUANT_MATMUL=avx9000 is not a kernel this CPU runs");
  });
});
