/**
 * Every GGUF quant type the converter maps exactly reaches ortserve's kernels as the values the
 * file encodes:
 * - the MatMulNBits blocks it packs (scale * (q - zero point) + offset) are the file's values
 *   exactly, as dequantize() decodes them, for random blocks of each type (every bit pattern of
 *   the quants and sub-block scales is a valid block);
 * - dequantize() decodes them as llama.cpp does: a synthetic model whose token embedding is of that
 *   type (llama.cpp's get_rows dequantizes it without touching the activations), converted to fp32,
 *   gives llama.cpp's logits to float rounding;
 * - converted to q4 with every matrix of that type, the model runs on ortserve's kernels
 *   (test/runner/quant-matmul-op.test.ts holds those to the blocks' arithmetic) and its logits are
 *   as close to those exact logits as llama.cpp's own run of the file (its int8 activations, Q8_K
 *   for K-quants) is, with the weights read in the bits per weight docs/formats-and-kernels.md
 *   names.
 * F16 and BF16 matrices stay in their 16 bits in a q4 model (exact; test/runner/half-matmul-op.test.ts
 * holds their kernel to the float product); a type without an exact mapping (Q8_K,
 * which llama.cpp uses only for activations) is refused by name unless requantizing is allowed.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onnxFileName } from "../../src/core/model/model-files.ts";
import { activationBlocksOf, describeModel } from "../../src/core/runner/attention-graph.ts";
import { convertGguf } from "../../src/models/convert/convert.ts";
import { hasIntegerBlocks } from "../../src/models/convert/integer-blocks.ts";
import { readQ8kActivations, readQuantReport } from "../../src/models/convert/quant-report.ts";
import {
  concatNBits,
  exactNBits,
  InexactQuantTypeError,
  type NBitsWeight,
  packNBits,
} from "../../src/models/convert/quantized-weights.ts";
import { dequantize } from "../../src/models/gguf/dequantize.ts";
import { ggmlTypeName } from "../../src/models/gguf/ggml-types.ts";
import { float32ToFp16 } from "../../src/models/gguf/half.ts";
import { GgmlType, type GgmlTypeId } from "../../src/models/gguf/types.ts";
import type { GgufTensorInput } from "../../src/models/gguf/writer.ts";
import { LlamaReference } from "../fidelity/llama-reference.ts";
import { type OrtCandidate, openOrtCandidate } from "../fidelity/ort-candidate.ts";
import { type SyntheticRow, writeRowGguf } from "../fixtures/synthetic-architectures.ts";
import { seededRandom } from "../fixtures/synthetic-model.ts";

/** Per type: bytes and elements per block, where its fp16 scales sit, and their magnitude. */
const LAYOUTS: Record<
  string,
  { type: GgmlTypeId; block: number; bytes: number; halves: [number, number][] }
> = {
  Q4_0: { type: GgmlType.Q4_0, block: 32, bytes: 18, halves: [[0, 0.05]] },
  Q4_1: {
    type: GgmlType.Q4_1,
    block: 32,
    bytes: 20,
    halves: [
      [0, 0.05],
      [2, -0.4],
    ],
  },
  Q5_0: { type: GgmlType.Q5_0, block: 32, bytes: 22, halves: [[0, 0.03]] },
  Q5_1: {
    type: GgmlType.Q5_1,
    block: 32,
    bytes: 24,
    halves: [
      [0, 0.03],
      [2, -0.4],
    ],
  },
  Q8_0: { type: GgmlType.Q8_0, block: 32, bytes: 34, halves: [[0, 0.004]] },
  Q3_K: { type: GgmlType.Q3_K, block: 256, bytes: 110, halves: [[108, 0.005]] },
  Q4_K: {
    type: GgmlType.Q4_K,
    block: 256,
    bytes: 144,
    halves: [
      [0, 0.002],
      [2, 0.01],
    ],
  },
  Q5_K: {
    type: GgmlType.Q5_K,
    block: 256,
    bytes: 176,
    halves: [
      [0, 0.001],
      [2, 0.01],
    ],
  },
  Q6_K: { type: GgmlType.Q6_K, block: 256, bytes: 210, halves: [[208, 0.0002]] },
  Q2_K: {
    type: GgmlType.Q2_K,
    block: 256,
    bytes: 84,
    halves: [
      [80, 0.02],
      [82, 0.01],
    ],
  },
};
const EXACT_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"];

/** Random blocks of `name` for `count` elements: random quants and sub-block scales, fp16 scales near the type's magnitude. */
function randomBlocks(name: string, count: number, seed: number): Uint8Array {
  const layout = LAYOUTS[name]!;
  const rand = seededRandom(seed);
  const blocks = count / layout.block;
  const out = Uint8Array.from({ length: blocks * layout.bytes }, () => Math.floor(rand() * 256));
  for (let b = 0; b < blocks; b++)
    for (const [at, magnitude] of layout.halves) {
      const h = float32ToFp16(magnitude * (0.5 + rand()));
      out[b * layout.bytes + at] = h & 0xff;
      out[b * layout.bytes + at + 1] = h >> 8;
    }
  return out;
}

/** Random Q8_K blocks: a float32 scale, 256 int8 quants and 16 (unused) sums. */
function randomQ8K(count: number, seed: number): Uint8Array {
  const rand = seededRandom(seed);
  const out = Uint8Array.from({ length: (count / 256) * 292 }, () => Math.floor(rand() * 256));
  const view = new DataView(out.buffer);
  for (let o = 0; o < out.length; o += 292) view.setFloat32(o, 0.004 * (0.5 + rand()), true);
  return out;
}

/** Random fp16 / bf16 values in [-1, 1). */
function randomFloats(type: GgmlTypeId, count: number, seed: number): Uint8Array {
  const rand = seededRandom(seed);
  const out = new Uint8Array(count * 2);
  const view = new DataView(out.buffer);
  for (let i = 0; i < count; i++) {
    const v = rand() * 2 - 1;
    view.setUint16(
      2 * i,
      type === GgmlType.F16 ? float32ToFp16(v) : new Uint32Array(new Float32Array([v]).buffer)[0]! >>> 16,
      true,
    );
  }
  return out;
}

/** MatMulNBits' weight (row, col): scale * (q - 2^(bits-1)) + offset, in float64. */
function nbitsValue(w: NBitsWeight, row: number, col: number): number {
  const at = row * (w.k / w.blockSize) + Math.floor(col / w.blockSize);
  const i = row * w.k + col;
  const q = w.bits === 8 ? w.data[i]! - 128 : (i & 1 ? w.data[i >> 1]! >> 4 : w.data[i >> 1]! & 15) - 8;
  return w.scales[at]! * q + (w.offsets?.[at] ?? 0);
}

/** Every element of w equals the file's value (float32, as llama.cpp's dequantization stores it). */
function expectFileValues(w: NBitsWeight, values: Float32Array): void {
  let mismatches = 0;
  for (let r = 0; r < w.n; r++)
    for (let c = 0; c < w.k; c++) if (Math.fround(nbitsValue(w, r, c)) !== values[r * w.k + c]) mismatches++;
  expect(mismatches).toBe(0);
}

describe("GGUF quant types → MatMulNBits blocks, exactly", () => {
  const n = 5;
  const k = 512;
  const forms: Record<string, { bits: number; blockSize: number; offsets: boolean }> = {
    Q4_0: { bits: 4, blockSize: 32, offsets: false },
    Q4_1: { bits: 4, blockSize: 32, offsets: true },
    Q5_0: { bits: 8, blockSize: 32, offsets: false },
    Q5_1: { bits: 8, blockSize: 32, offsets: true },
    Q8_0: { bits: 8, blockSize: 32, offsets: false },
    Q2_K: { bits: 4, blockSize: 16, offsets: true },
    Q3_K: { bits: 4, blockSize: 16, offsets: false },
    Q4_K: { bits: 4, blockSize: 32, offsets: true },
    Q5_K: { bits: 8, blockSize: 32, offsets: true },
    Q6_K: { bits: 8, blockSize: 16, offsets: false },
  };
  for (const name of EXACT_TYPES)
    it(`${name}: the packed blocks hold the file's values`, () => {
      const { type } = LAYOUTS[name]!;
      const bytes = randomBlocks(name, n * k, 3);
      const { weight, exact } = packNBits(type, bytes, n, k, () => new Float32Array(), { name: "w" });
      expect(exact).toBe(true);
      expect({
        bits: weight.bits,
        blockSize: weight.blockSize,
        offsets: weight.offsets !== undefined,
      }).toEqual(forms[name]);
      expectFileValues(weight, dequantize(type, bytes, n * k));
    });

  it("Q4_K whose folded offset float32 cannot hold goes to 8-bit blocks, still exactly", () => {
    const bytes = randomBlocks("Q4_K", 256, 5);
    // d large, dmin tiny with a full mantissa: 8 * d * sc - dmin * m needs more than 24 bits.
    bytes.set([float32ToFp16(3.0) & 0xff, float32ToFp16(3.0) >> 8, 0x01, 0x00], 0);
    bytes[4] = 63; // sub-block 0: scale 63
    bytes[8] = 63; // sub-block 0: min 63
    const w = exactNBits(GgmlType.Q4_K, bytes, 1, 256)!;
    expect(w.bits).toBe(8);
    expectFileValues(w, dequantize(GgmlType.Q4_K, bytes, 256));
  });

  it("stacking Q4_K, Q6_K, Q5_0 and Q2_K rows keeps every row's values (8-bit, scales and offsets per 16)", () => {
    const parts = (["Q4_K", "Q6_K", "Q5_0", "Q2_K"] as const).map((name, i) => {
      const bytes = randomBlocks(name, 2 * k, 10 + i);
      return {
        w: exactNBits(LAYOUTS[name]!.type, bytes, 2, k)!,
        values: dequantize(LAYOUTS[name]!.type, bytes, 2 * k),
      };
    });
    const both = concatNBits(parts.map((p) => p.w));
    expect({ bits: both.bits, blockSize: both.blockSize, n: both.n }).toEqual({
      bits: 8,
      blockSize: 16,
      n: 8,
    });
    const values = new Float32Array(8 * k);
    for (const [i, p] of parts.entries()) values.set(p.values, i * 2 * k);
    expectFileValues(both, values);
    // llama.cpp's activation blocks: Q8_K for a stack of K-quants alone, else blocks of 32 for all.
    expect(parts.map((p) => p.w.activationBlock)).toEqual([256, 256, undefined, 256]);
    expect(both.activationBlock).toBeUndefined();
    expect(concatNBits([parts[0]!.w, parts[1]!.w]).activationBlock).toBe(256);
  });

  for (const type of [GgmlType.F16, GgmlType.BF16, GgmlType.Q8_K]) {
    const name = ggmlTypeName(type);
    it(`${name} is refused by tensor and type, and requantized only when allowed`, () => {
      expect(hasIntegerBlocks(type)).toBe(false);
      const bytes = type === GgmlType.Q8_K ? randomQ8K(n * k, 4) : randomFloats(type, n * k, 4);
      const values = dequantize(type, bytes, n * k);
      const pack = (allowRequantize: boolean) =>
        packNBits(type, bytes, n, k, () => values, { name: "blk.3.ffn_down.weight", allowRequantize });
      expect(() => pack(false)).toThrow(InexactQuantTypeError);
      expect(() => pack(false)).toThrow(`tensor blk.3.ffn_down.weight is ${name}`);
      const { weight, exact } = pack(true);
      expect(exact).toBe(false);
      expect(weight.bits).toBe(8);
    });
  }
});

/** A one-layer qwen2 whose rows are whole K-quant blocks (256). */
const ROW: SyntheticRow = {
  arch: "qwen2",
  pre: "qwen2",
  layers: 1,
  hidden: 256,
  ffn: 512,
  heads: 4,
  kvHeads: 2,
  headDim: 64,
  ropeTheta: 1e6,
  rmsEps: 1e-6,
  qkvBias: true,
  untiedHead: true,
};
const PROMPT = [5, 40, 80, 120, 3, 200, 17, 260, 9, 99, 150, 42];
const MATRICES = /attn_(q|k|v|output)\.weight|ffn_(gate|up|down)\.weight|^output\.weight|^token_embd\.weight/;

/** Largest |a - b| relative to the largest |b|. */
function relativeMaxError(a: Float32Array, b: Float32Array): number {
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    diff = Math.max(diff, Math.abs(a[i]! - b[i]!));
    scale = Math.max(scale, Math.abs(b[i]!));
  }
  expect(scale).toBeGreaterThan(1);
  return diff / scale;
}

/**
 * The median over positions of each position's relative max error: a random model has positions
 * where a small change flips attention, which either engine's activation rounding may hit.
 */
function medianRowError(got: Float32Array, want: Float32Array): number {
  const width = want.length / PROMPT.length;
  const errors = PROMPT.map((_, i) =>
    relativeMaxError(got.subarray(i * width, (i + 1) * width), want.subarray(i * width, (i + 1) * width)),
  ).sort((a, b) => a - b);
  return errors[Math.floor(errors.length / 2)]!;
}

const FLOAT_TYPES: Record<string, GgmlTypeId> = { F16: GgmlType.F16, BF16: GgmlType.BF16 };

/** Bits per weight the native kernel reads for a model of one type (docs/formats-and-kernels.md). */
const KERNEL_BITS: Record<string, number> = {
  Q4_0: 4.5,
  // Half scales and offsets: the nibbles' folded zero point is taken out of the offsets.
  Q4_1: 5.0,
  Q8_0: 8.5,
  Q5_0: 5.5,
  Q5_1: 6.0,
  // K-quants' sub-block scale (and min) codes as narrow as the file's: 6 bits (Q4_K, Q5_K, Q3_K),
  // 4 (Q2_K), 8 (Q6_K); Q6_K and Q3_K padded so each super-block's quants stay 64-byte aligned.
  Q4_K: 4.5,
  Q5_K: 5.5,
  Q6_K: 6.625,
  // 3- and 2-bit quants (the kernel's narrow forms).
  Q3_K: 3.5,
  Q2_K: 2.625,
};

describe.each([...EXACT_TYPES, ...Object.keys(FLOAT_TYPES)])("%s against llama.cpp", (name) => {
  const float = FLOAT_TYPES[name];
  const type = float ?? LAYOUTS[name]!.type;
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), `ortserve-quant-${name}-`));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  /** The row's GGUF with the tensors `which` selects stored as random blocks of the type. */
  const write = (file: string, which: (tensor: GgufTensorInput) => boolean, row = ROW) =>
    writeRowGguf(join(root, file), row, 7, (t) => {
      if (!which(t)) return t;
      const count = t.dims.reduce((a, b) => a * b, 1);
      const seed = count + t.name.length;
      return { ...t, type, data: float ? randomFloats(type, count, seed) : randomBlocks(name, count, seed) };
    });

  it("dequantizes as llama.cpp does: an embedding of the type gives llama.cpp's logits", async () => {
    const gguf = write("embedding.gguf", (t) => t.name === "token_embd.weight");
    const modelDir = join(root, "embedding");
    await convertGguf(gguf, modelDir, { format: "fp32" });
    const reference = await LlamaReference.load(gguf, { threads: 1, contextSize: 64 });
    const ours = await openOrtCandidate(modelDir, "fp32", 1);
    try {
      const theirs = await reference.logitRows(PROMPT);
      expect(relativeMaxError(await ours.teacherForced(PROMPT), theirs)).toBeLessThan(1e-5);
    } finally {
      await ours.release();
      await reference.dispose();
    }
  });

  /** Every matrix of the type, q4 against fp32 (the exact model) and llama.cpp's run of the file. */
  async function everyMatrix(label: string, row: SyntheticRow): Promise<void> {
    const gguf = write(`${label}.gguf`, (t) => MATRICES.test(t.name), row);
    const exactDir = join(root, `${label}-fp32`);
    const quantDir = join(root, `${label}-q4`);
    await convertGguf(gguf, exactDir, { format: "fp32" });
    const { quantTypes } = await convertGguf(gguf, quantDir, { format: "q4" });
    expect(quantTypes.find((u) => u.type === name)?.mapping).toBe("exact");
    expect(quantTypes.every((u) => u.mapping === "exact")).toBe(true);
    expect(readQuantReport(quantDir)).toEqual(quantTypes);
    // Activations go in blocks of 32 unless asked otherwise: nothing is recorded for the kernel.
    expect(activationBlocksOf(readFileSync(join(quantDir, "onnx", onnxFileName("q4"))))).toEqual({});
    if (float) {
      // 16-bit matrices, the embedding table too, stay in their 16 bits in a q4 model: its logits
      // are the exact model's to float rounding.
      expect(quantTypes.map((u) => u.stored)).toEqual(["16-bit float"]);
      const exact = await openOrtCandidate(exactDir, "fp32", 1);
      const quant = await openOrtCandidate(quantDir, "q4", 1);
      try {
        const want = await exact.teacherForced(PROMPT);
        expect(relativeMaxError(await quant.teacherForced(PROMPT), want)).toBeLessThan(1e-5);
        const { projections, packedWeightBytes } = await quant.runtime();
        if (projections === "ortserve.BlockQuantMatMul") {
          // 2 bytes a weight: every matrix but the embedding (gathered), the columns padded to
          // tiles of 16.
          const { vocab_size: vocab } = JSON.parse(readFileSync(join(quantDir, "config.json"), "utf8"));
          const projected = quantTypes[0]!.weights - vocab * row.hidden;
          expect((packedWeightBytes! * 8) / projected).toBeCloseTo(16, 1);
        }
      } finally {
        await exact.release();
        await quant.release();
      }
      return;
    }
    await againstExact(gguf, exactDir, quantDir, async ({ ours, theirs, quant }) => {
      // llama.cpp's own run of the file is the yardstick: its int8 activations err as ours do (a
      // wrong value anywhere would put ours far off: the weights are of the order of the logits').
      expect(ours).toBeLessThan(5e-2);
      expect(ours).toBeLessThanOrEqual(1.5 * theirs);
      // The kernel reads the form the docs name (the lm head's columns padded to whole tiles of
      // 16; a tied head is read in the gathered table's wider form, so only untied rows count).
      const { projections, packedWeightBytes } = await quant.runtime();
      if (projections === "ortserve.BlockQuantMatMul" && row.untiedHead) {
        const { vocab_size: vocab } = JSON.parse(readFileSync(join(quantDir, "config.json"), "utf8"));
        // Every matrix but the embedding, which is gathered, not multiplied.
        const projected = quantTypes.find((u) => u.type === name)!.weights - vocab * row.hidden;
        expect((packedWeightBytes! * 8) / projected).toBeCloseTo(KERNEL_BITS[name]!, 2);
      }
    });
  }

  /**
   * The median row error of the q4 model's logits (ours) and of llama.cpp's run of the GGUF
   * (theirs) against the exact model's, over PROMPT, for `check`.
   */
  async function againstExact(
    gguf: string,
    exactDir: string,
    quantDir: string,
    check: (r: { ours: number; theirs: number; quant: OrtCandidate }) => Promise<void>,
  ): Promise<void> {
    const exact = await openOrtCandidate(exactDir, "fp32", 1);
    const quant = await openOrtCandidate(quantDir, "q4", 1);
    const reference = await LlamaReference.load(gguf, { threads: 1, contextSize: 64 });
    try {
      const want = await exact.teacherForced(PROMPT);
      const ours = medianRowError(await quant.teacherForced(PROMPT), want);
      const theirs = medianRowError(await reference.logitRows(PROMPT), want);
      await check({ ours, theirs, quant });
    } finally {
      await exact.release();
      await quant.release();
      await reference.dispose();
    }
  }

  it("runs every matrix of the type on ortserve's kernels, as close to the exact logits as llama.cpp", () =>
    everyMatrix("untied", ROW));

  // Asked for llama.cpp's arithmetic, a K-quant's activations go in its Q8_K blocks of 256: the
  // model records every projection's weights so for the kernel, and the report names it.
  it.runIf(name.endsWith("_K"))("converts with llama.cpp's Q8_K activations when asked", async () => {
    const gguf = write("q8k.gguf", (t) => MATRICES.test(t.name));
    const quantDir = join(root, "q8k-q4");
    const { q8kActivations } = await convertGguf(gguf, quantDir, { format: "q4", q8kActivations: true });
    const model = readFileSync(join(quantDir, "onnx", onnxFileName("q4")));
    const projections = describeModel(model)
      .nodes.filter((n) => n.opType === "MatMulNBits")
      .map((n) => n.inputs[1]!);
    expect(projections.length).toBeGreaterThan(0);
    const recorded = activationBlocksOf(model);
    expect(projections.map((p) => recorded[p])).toEqual(projections.map(() => 256));
    expect(q8kActivations).toEqual({ projections: projections.length, of: projections.length });
    expect(readQ8kActivations(quantDir)).toEqual(q8kActivations);
    const exactDir = join(root, "q8k-fp32");
    await convertGguf(gguf, exactDir, { format: "fp32" });
    // The same int8 activations as llama.cpp's run: as far from the exact logits, give or take
    // the float rounding that moves a few of them to the next step.
    await againstExact(gguf, exactDir, quantDir, async ({ ours, theirs }) => {
      expect(ours).toBeLessThanOrEqual(1.5 * theirs);
    });
  });

  // A tied table with offsets is gathered from, and multiplied by, the same block-sum-row initializers.
  it.runIf(name === "Q4_K")("serves a tied embedding of the type as the lm head too", () =>
    everyMatrix("tied", { ...ROW, untiedHead: false }),
  );
});

describe("a GGUF with a type ortserve cannot map exactly", () => {
  let root: string;
  let gguf: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), "ortserve-quant-q8k-"));
    gguf = writeRowGguf(join(root, "q8k.gguf"), ROW, 7, (t) => {
      if (!MATRICES.test(t.name)) return t;
      const count = t.dims.reduce((a, b) => a * b, 1);
      if (t.name === "blk.0.ffn_down.weight")
        return { ...t, type: GgmlType.Q8_K, data: randomQ8K(count, count) };
      return { ...t, type: GgmlType.Q4_K, data: randomBlocks("Q4_K", count, count) };
    });
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("is refused, naming the tensor and its type", async () => {
    await expect(convertGguf(gguf, join(root, "refused"), { format: "q4" })).rejects.toThrow(
      "tensor blk.0.ffn_down.weight is Q8_K",
    );
  });

  it("converts with allowRequantize, and the report says which type was requantized", async () => {
    const dir = join(root, "requantized");
    const { quantTypes } = await convertGguf(gguf, dir, { format: "q4", allowRequantize: true });
    expect(quantTypes.filter((u) => u.mapping === "requantized")).toEqual([
      {
        type: "Q8_K",
        mapping: "requantized",
        stored: "8-bit, scales per 32",
        tensors: 1,
        weights: 512 * 256,
      },
    ]);
    expect(quantTypes.find((u) => u.type === "Q4_K")?.mapping).toBe("exact");
    expect(readQuantReport(dir)).toEqual(quantTypes);
  });
});
