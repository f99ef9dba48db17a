/**
 * The native epilogue operators (native/src/projection-epilogue.cc) against the ONNX nodes they
 * replace, on small graphs that hold nothing else: the Q4_1 offset term (Split, MatMul, Add) and
 * the SwiGLU (Split, Sigmoid, Mul, Mul), fused apart and together, onnxruntime-node running the
 * graph as written and the native session running the rewrite.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InferenceSession, Tensor } from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeModel, withCachedAttention } from "../../src/core/runner/attention-graph.ts";
import { BLOCK_OFFSET_OP, BLOCK_OFFSET_SWIGLU_OP, SWIGLU_OP } from "../../src/core/runner/epilogue-graph.ts";
import { nativeSessions } from "../../src/core/runner/native-session.ts";
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
      const exact = await InferenceSession.create(path, { intraOpNumThreads: 2 });
      const ours = nativeSessions!.create(path, {
        intraOpThreads: 2,
        interOpThreads: 1,
        cachedAttention: true,
      });
      try {
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
      } finally {
        await exact.release();
        await ours.release();
      }
    });
});
