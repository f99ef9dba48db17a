/**
 * The native epilogue operators (native/src/projection-epilogue.cc) against the ONNX nodes they
 * replace, on small graphs that hold nothing else: the Q4_1 offset term (Split, MatMul, Add) and
 * the SwiGLU (Split, Sigmoid, Mul, Mul), fused apart and together, and the GeGLU (Split and the
 * converter's GELU table nodes) with and without the offset term, onnxruntime-node running the
 * graph as written and the native session running the rewrite. The GeGLU gives the graph's floats
 * exactly, for every binary16 gate value and beyond the table's range.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InferenceSession, Tensor } from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeModel, withCachedAttention } from "../../src/core/runner/attention-graph.ts";
import {
  BLOCK_OFFSET_GEGLU_OP,
  BLOCK_OFFSET_OP,
  BLOCK_OFFSET_SWIGLU_OP,
  GEGLU_OP,
  SWIGLU_OP,
} from "../../src/core/runner/epilogue-graph.ts";
import { nativeSessions } from "../../src/core/runner/native-session.ts";
import { tanhGeluFp16Table } from "../../src/models/convert/decoder-graph.ts";
import { ExternalDataFile, GraphBuilder } from "../../src/models/convert/onnx/graph-builder.ts";
import { OnnxDataType } from "../../src/models/convert/onnx/proto.ts";
import { relativeGap } from "./relative-gap.ts";
import { runAll } from "./run-all.ts";
import { values } from "./seeded-values.ts";

const F = OnnxDataType.FLOAT;
const N = 200; // gate/up width: 100 columns a half, not a whole number of 8-lane vectors per tile
const BLOCKS = 5;

/** both [rows, N + BLOCKS] → offset term → SwiGLU → act; `exposeProjection` also outputs the projection. */
function writeGraph(dir: string, exposeProjection: boolean): string {
  const external = new ExternalDataFile(join(dir, `g${exposeProjection}.onnx_data`));
  const g = new GraphBuilder(external);
  const both = g.input("both", F, ["rows", N + BLOCKS]);
  const offsets = g.initializer("offsets", F, [BLOCKS, N], values(BLOCKS * N, 7, 0.5));
  const [y, sums] = g.node("Split", [both, g.int64s([N, BLOCKS])], ["y", "sums"], { axis: -1 });
  const projection = g.op("Add", [y!, g.op("MatMul", [sums!, offsets], "corr")], "projection");
  const [gate, up] = g.node("Split", [projection, g.int64s([N / 2, N / 2])], ["gate", "up"], { axis: -1 });
  const silu = g.op("Mul", [gate!, g.op("Sigmoid", [gate!], "sigmoid")], "silu");
  g.node("Mul", [silu, up!], ["act"]);
  g.output("act", F, ["rows", N / 2]);
  if (exposeProjection) g.output("projection", F, ["rows", N]);
  external.close();
  const path = join(dir, `g${exposeProjection}.onnx`);
  writeFileSync(path, g.encode({ producerVersion: "test" }));
  return path;
}

/** The converter's GeGLU of gu [rows, 2W] → act [rows, W], after the offset term when `offsets`. */
function writeGeGluGraph(dir: string, width: number, offsets: boolean): string {
  const external = new ExternalDataFile(join(dir, `geglu${offsets}.onnx_data`));
  const g = new GraphBuilder(external);
  let projection: string;
  if (offsets) {
    const both = g.input("both", F, ["rows", 2 * width + BLOCKS]);
    const c = g.initializer("offsets", F, [BLOCKS, 2 * width], values(BLOCKS * 2 * width, 5, 0.5));
    const [y, sums] = g.node("Split", [both, g.int64s([2 * width, BLOCKS])], ["y", "sums"], { axis: -1 });
    projection = g.op("Add", [y!, g.op("MatMul", [sums!, c], "corr")], "projection");
  } else {
    projection = g.input("gu", F, ["rows", 2 * width]);
  }
  const [gate, up] = g.node("Split", [projection, g.int64s([width, width])], ["gate", "up"], { axis: -1 });
  g.node("Mul", [tanhGeluFp16Table(g, "mlp", gate!), up!], ["act"]);
  g.output("act", F, ["rows", width]);
  external.close();
  const path = join(dir, `geglu${offsets}.onnx`);
  writeFileSync(path, g.encode({ producerVersion: "test" }));
  return path;
}

/** onnxruntime-node running the graph as written, and the native session running the rewrite. */
async function withBoth(
  path: string,
  check: (
    exact: InferenceSession,
    ours: ReturnType<NonNullable<typeof nativeSessions>["create"]>,
  ) => Promise<void>,
): Promise<void> {
  const exact = await InferenceSession.create(path, { intraOpNumThreads: 2 });
  const ours = nativeSessions!.create(path, { intraOpThreads: 2, interOpThreads: 1, cachedAttention: true });
  try {
    await check(exact, ours);
  } finally {
    await exact.release();
    await ours.release();
  }
}

describe.skipIf(!nativeSessions)("native projection epilogues", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "ortserve-epilogue-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  for (const exposeProjection of [false, true])
    it(`match the nodes they replace (${exposeProjection ? "offset and SwiGLU apart" : "fused together"})`, async () => {
      const path = writeGraph(dir, exposeProjection);
      const fused = describeModel(withCachedAttention(readFileSync(path))!).nodes.map((n) => n.opType);
      expect(fused).toEqual(exposeProjection ? [BLOCK_OFFSET_OP, SWIGLU_OP] : [BLOCK_OFFSET_SWIGLU_OP]);
      await withBoth(path, async (exact, ours) => {
        // One row (a decode step, run inline) to 300 (a prefill chunk, spread over the threads).
        for (const rows of [1, 7, 300]) {
          const feeds = {
            both: new Tensor("float32", values(rows * (N + BLOCKS), rows, 3), [rows, N + BLOCKS]),
          };
          const want = await exact.run(feeds);
          const got = await runAll(ours, feeds);
          expect(got.act!.dims).toEqual([rows, N / 2]);
          expect(relativeGap(want.act!.data as Float32Array, got.act!.data as Float32Array)).toBeLessThan(
            1e-6,
          );
          if (exposeProjection)
            expect(
              relativeGap(want.projection!.data as Float32Array, got.projection!.data as Float32Array),
            ).toBeLessThan(1e-6);
        }
      });
    });

  // 260 gates a row: vectors of 8 and a remainder the portable loop takes.
  const WIDTH = 260;
  it("GeGLU gives the graph's floats for every binary16 gate and beyond the table", async () => {
    const path = writeGeGluGraph(dir, WIDTH, false);
    const fused = describeModel(withCachedAttention(readFileSync(path))!).nodes.map((n) => n.opType);
    expect(fused).toEqual([GEGLU_OP]);
    // Every binary16 value (infinities and NaN among them), then values the table does not hold.
    const halves = new Uint16Array(1 << 16).map((_, i) => i);
    const beyond = [9.999, 10, 10.001, -10, -10.001, -9.999, 1e6, -1e6, 3.4e38, -3.4e38, 1e-9, -1e-9];
    const gates = [...new Float32Array(new Float16Array(halves.buffer)), ...beyond];
    const rows = Math.ceil(gates.length / WIDTH);
    const gu = new Float32Array(rows * 2 * WIDTH);
    const ups = values(rows * WIDTH, 9, 2);
    for (let i = 0; i < rows * WIDTH; i++) {
      const r = Math.floor(i / WIDTH);
      gu[r * 2 * WIDTH + (i % WIDTH)] = gates[i % gates.length]!;
      gu[r * 2 * WIDTH + WIDTH + (i % WIDTH)] = ups[i]!;
    }
    await withBoth(path, async (exact, ours) => {
      for (const n of [1, 7, rows]) {
        const feeds = { gu: new Tensor("float32", gu.subarray(0, n * 2 * WIDTH), [n, 2 * WIDTH]) };
        const want = (await exact.run(feeds)).act!.data as Float32Array;
        const got = (await runAll(ours, feeds)).act!.data as Float32Array;
        // Zeros by value: ONNX Runtime's Cast to binary16 gives the table's -0 entries as +0, where
        // the native table keeps ggml's -0 (F16C's conversion), so a product's zero may differ in sign.
        const unsignedZeros = (v: Float32Array) => Float32Array.from(v, (x) => (x === 0 ? 0 : x));
        expect(unsignedZeros(got)).toEqual(unsignedZeros(want));
      }
    });
  });

  it("GeGLU after the offset term is one operator", async () => {
    const path = writeGeGluGraph(dir, WIDTH, true);
    const fused = describeModel(withCachedAttention(readFileSync(path))!).nodes.map((n) => n.opType);
    expect(fused).toEqual([BLOCK_OFFSET_GEGLU_OP]);
    await withBoth(path, async (exact, ours) => {
      for (const rows of [1, 7, 300]) {
        const width = 2 * WIDTH + BLOCKS;
        const feeds = { both: new Tensor("float32", values(rows * width, rows, 3), [rows, width]) };
        const want = (await exact.run(feeds)).act!.data as Float32Array;
        const got = (await runAll(ours, feeds)).act!.data as Float32Array;
        // The offset product sums in another order: a few gates land on the next binary16 step.
        expect(relativeGap(want, got)).toBeLessThan(1e-3);
      }
    });
  });
});
