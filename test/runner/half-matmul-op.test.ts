/**
 * ortserve.HalfMatMul and BFloat16MatMul (native/src/half-matmul.cc) against the converter's
 * 16-bit projection they replace, MatMul(x, Cast(B, to float)) with B a float16 or bfloat16
 * initializer: the native session keeps B in its 16 bits (packed bytes: 2 a weight, the columns
 * padded to tiles of 16) and computes, from the exact float values of its bits, what ONNX Runtime
 * computes from its float32 copy, to float rounding. Every kernel gives the same floats, and a
 * row's result does not depend on the rows run beside it.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InferenceSession, Tensor } from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeModel, withCachedAttention } from "../../src/core/runner/attention-graph.ts";
import { BFLOAT16_MATMUL_OP, HALF_MATMUL_OP } from "../../src/core/runner/epilogue-graph.ts";
import { nativeSessions } from "../../src/core/runner/native-session.ts";
import { ExternalDataFile, GraphBuilder } from "../../src/models/convert/onnx/graph-builder.ts";
import { OnnxDataType } from "../../src/models/convert/onnx/proto.ts";
import { float32ToFp16, fp16ToFloat32 } from "../../src/models/gguf/half.ts";
import { relativeGap } from "./relative-gap.ts";
import { runAll } from "./run-all.ts";

const F = OnnxDataType.FLOAT;

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const FORMATS = {
  f16: {
    type: OnnxDataType.FLOAT16,
    op: HALF_MATMUL_OP,
    encode: (v: number) => float32ToFp16(v),
    decode: (h: number) => fp16ToFloat32(h),
  },
  bf16: {
    type: OnnxDataType.BFLOAT16,
    op: BFLOAT16_MATMUL_OP,
    // Truncation is as good as any rounding here: the bits are the weights.
    encode: (v: number) => new Uint32Array(new Float32Array([v]).buffer)[0]! >>> 16,
    decode: (h: number) => new Float32Array(new Uint32Array([h << 16]).buffer)[0]!,
  },
} as const;

/**
 * The graph the converter writes for a 16-bit projection, y = x MatMul Cast(B [k, n]), or for a
 * tied head, y = x MatMul Cast(Transpose(E [n, k])) (`transposed`: b holds E).
 */
function writeGraph(
  dir: string,
  name: string,
  format: keyof typeof FORMATS,
  b: Uint16Array,
  k: number,
  n: number,
  transposed: boolean,
) {
  const external = new ExternalDataFile(join(dir, `${name}.onnx_data`));
  const g = new GraphBuilder(external);
  const x = g.input("x", F, ["rows", k]);
  const weights = g.initializer("b", FORMATS[format].type, transposed ? [n, k] : [k, n], b);
  const table = transposed ? g.op("Transpose", [weights], "b_t", { perm: [1, 0] }) : weights;
  const widened = g.op("Cast", [table], "b_float", { to: F });
  g.node("MatMul", [x, widened], ["y"]);
  g.output("y", F, ["rows", n]);
  external.close();
  const path = join(dir, `${name}.onnx`);
  writeFileSync(path, g.encode({ producerVersion: "test" }));
  return path;
}

describe.skipIf(!nativeSessions?.blockQuantMatMul)("ortserve.HalfMatMul and BFloat16MatMul", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "ortserve-half-matmul-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  // n not a multiple of the tile's 16 columns, k of no particular block.
  const k = 300;
  const n = 40;
  for (const [format, transposed] of [
    ["f16", false],
    ["bf16", false],
    ["f16", true],
  ] as const) {
    it(`keeps ${format} weights in 16 bits and computes the projection${transposed ? " (a tied head's table)" : ""}`, async () => {
      const { op, encode, decode } = FORMATS[format];
      const next = lcg(format === "f16" ? 5 : 6);
      const b = Uint16Array.from({ length: k * n }, () => encode((next() - 0.5) * 0.2));
      const path = writeGraph(dir, `${format}-${transposed}`, format, b, k, n, transposed);
      // Input j's weight for column c.
      const weightAt = (j: number, c: number) => decode(b[transposed ? c * k + j : j * n + c]!);
      const rewritten = withCachedAttention(readFileSync(path), { quantMatMul: true })!;
      expect(describeModel(rewritten).nodes.map((node) => node.opType)).toEqual([op]);
      const asWritten = await InferenceSession.create(path, { intraOpNumThreads: 2 });
      const ours = nativeSessions!.create(path, {
        intraOpThreads: 2,
        interOpThreads: 1,
        cachedAttention: true,
      });
      try {
        expect(ours.packedWeightBytes).toBe(Math.ceil(n / 16) * 16 * k * 2);
        const rowsOf = (x: Float32Array, rows: number) => ({ x: new Tensor("float32", x, [rows, k]) });
        const inputs = lcg(11);
        const all = Float32Array.from({ length: 300 * k }, () => (inputs() - 0.5) * 4);
        // A decode step, a pass of 4 with a remainder, a prefill chunk (threaded).
        for (const rows of [1, 7, 300]) {
          const x = all.subarray(0, rows * k);
          const got = (await runAll(ours, rowsOf(x, rows))).y!;
          expect(got.dims).toEqual([rows, n]);
          const gotData = got.data as Float32Array;
          // The exact product of the bits' values, in float64.
          const exact = new Float32Array(rows * n);
          for (let r = 0; r < rows; r++)
            for (let c = 0; c < n; c++) {
              let sum = 0;
              for (let j = 0; j < k; j++) sum += x[r * k + j]! * weightAt(j, c);
              exact[r * n + c] = sum;
            }
          expect(relativeGap(exact, gotData)).toBeLessThan(1e-5);
          const theirs = (await asWritten.run(rowsOf(x, rows))).y!.data as Float32Array;
          expect(relativeGap(theirs, gotData)).toBeLessThan(1e-5);
          // Row 0 alone gives the same floats as row 0 among others.
          const first = (await runAll(ours, rowsOf(x.subarray(0, k), 1))).y!.data as Float32Array;
          expect(gotData.subarray(0, n)).toEqual(first);
          // Every kernel this CPU runs gives the same floats (the portable one on the small cases).
          const best = nativeSessions!.blockQuantMatMulKernels[0]!;
          for (const kernel of nativeSessions!.blockQuantMatMulKernels.slice(1)) {
            if (kernel === "scalar" && rows > 7) continue;
            expect(nativeSessions!.setBlockQuantMatMulKernel(kernel)).toBe(kernel);
            try {
              expect((await runAll(ours, rowsOf(x, rows))).y!.data, kernel).toEqual(gotData);
            } finally {
              expect(nativeSessions!.setBlockQuantMatMulKernel(best)).toBe(best);
            }
          }
        }
      } finally {
        await asWritten.release();
        await ours.release();
      }
    });
  }

  it("leaves a Cast of a computed value, or of float32 weights, to ONNX Runtime", () => {
    const external = new ExternalDataFile(join(dir, "other.onnx_data"));
    const g = new GraphBuilder(external);
    const x = g.input("x", F, ["rows", k]);
    const b = g.initializer("b", F, [k, n], new Float32Array(k * n));
    const h = g.input("h", OnnxDataType.FLOAT16, ["rows", k]);
    g.node("MatMul", [x, g.op("Cast", [b], "b_float", { to: F })], ["y"]);
    g.node("MatMul", [g.op("Cast", [h], "h_float", { to: F }), g.op("Transpose", [b], "bt")], ["z"]);
    g.output("y", F, ["rows", n]);
    g.output("z", F, ["rows", n]);
    external.close();
    const model = g.encode({ producerVersion: "test" });
    const rewritten = withCachedAttention(model, { quantMatMul: true });
    const ops = describeModel(rewritten ?? model).nodes.map((node) => node.opType);
    expect(ops).not.toContain(HALF_MATMUL_OP);
    expect(ops).not.toContain(BFLOAT16_MATMUL_OP);
  });
});
