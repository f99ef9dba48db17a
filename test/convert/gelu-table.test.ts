/**
 * gemma3's GELU graph against ggml's CPU GeGLU (ggml_vec_geglu_f32 with GGML_GELU_FP16), written
 * out here from its definition: 0 from -10 down, the input from 10 up, and between them the
 * binary16 table entry of the binary16-rounded input, computed as ggml_gelu_f32 computes it
 * (tanhf taken as float32 rounding of the exact tanh).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InferenceSession, Tensor } from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tanhGeluFp16Table } from "../../src/models/convert/decoder-graph.ts";
import { ExternalDataFile, GraphBuilder } from "../../src/models/convert/onnx/graph-builder.ts";
import { OnnxDataType } from "../../src/models/convert/onnx/proto.ts";
import { ggmlGelu } from "../fixtures/ggml-gelu.ts";

describe("gemma3 GELU as llama.cpp's CPU backend computes it", () => {
  let dir: string;
  let session: InferenceSession;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "ortserve-gelu-"));
    const external = new ExternalDataFile(join(dir, "gelu.onnx_data"));
    const g = new GraphBuilder(external);
    const x = g.input("x", OnnxDataType.FLOAT, ["n"]);
    g.node("Identity", [tanhGeluFp16Table(g, "t", x)], ["y"]);
    g.output("y", OnnxDataType.FLOAT, ["n"]);
    external.close();
    const path = join(dir, "gelu.onnx");
    writeFileSync(path, g.encode({ producerVersion: "test" }));
    session = await InferenceSession.create(path, { intraOpNumThreads: 1 });
  });
  afterAll(async () => {
    await session?.release();
    rmSync(dir, { recursive: true, force: true });
  });

  it("gives ggml's table entry for every binary16 input in (-12, 12)", async () => {
    const inputs: number[] = [];
    for (let u = 0; u < 0x10000; u++) {
      const v = new Float16Array(new Uint16Array([u]).buffer)[0]!;
      if (Math.abs(v) < 12) inputs.push(v);
    }
    const x = Float32Array.from(inputs);
    const y = (await session.run({ x: new Tensor("float32", x, [x.length]) })).y!.data as Float32Array;
    const off: number[] = [];
    // 0 and -0 are one value (ggml's 0 from -10 down against the table's -0).
    for (let i = 0; i < x.length; i++) if (y[i]! !== ggmlGelu(x[i]!)) off.push(x[i]!);
    expect(x.length).toBeGreaterThan(30000);
    expect(off).toEqual([]);
  });

  it("takes the input from 10 up and 0 from -10 down, beyond binary16's range too, and rounds in between", async () => {
    const x = Float32Array.of(-1e30, -70000, -10.5, -10, 10, 10.0001, 70000, 3e38, 0.3333333, -2.7182817);
    const y = (await session.run({ x: new Tensor("float32", x, [x.length]) })).y!.data as Float32Array;
    expect([...y.slice(0, 4)].map((v) => v + 0)).toEqual([0, 0, 0, 0]);
    expect([...y.slice(4, 8)]).toEqual([...x.slice(4, 8)]);
    expect(y[8]).toBe(ggmlGelu(x[8]!));
    expect(y[9]).toBe(ggmlGelu(x[9]!));
    expect(y[8]).toBe(Math.f16round(y[8]!));
  });
});
