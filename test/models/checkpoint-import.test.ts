/**
 * `checkpoint import` on a synthetic training run written here: Trainer checkpoint-<step>/ folders
 * whose safetensors hold the weights of a synthetic GGUF (renamed to transformers' names, Q/K rows
 * back in Hugging Face order), a GGUF named by step, and trainer_state.json. The imported
 * checkpoint must compute exactly what the same weights converted from the GGUF compute.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importTrainingRun } from "../../src/cli/commands/checkpoint-import.ts";
import { Engine } from "../../src/engine/engine.ts";
import { convertGguf } from "../../src/models/convert/convert.ts";
import { GGUF_TENSOR_NAMES } from "../../src/models/convert/gguf-weights.ts";
import { unpermuteLlamaRows } from "../../src/models/convert/quantized-weights.ts";
import { HF_LLAMA_TENSOR_NAMES } from "../../src/models/convert/safetensors-weights.ts";
import type { TensorNames } from "../../src/models/convert/table-weights.ts";
import { openGguf } from "../../src/models/gguf/reader.ts";
import { discoverCheckpoints, trainerMetrics } from "../../src/models/import/training-run.ts";
import { ModelRegistry } from "../../src/models/registry.ts";
import { openSafetensors } from "../../src/models/safetensors/reader.ts";
import { buildSyntheticModel, SYNTHETIC, writeSyntheticGguf } from "../fixtures/synthetic-model.ts";

interface Tensor {
  name: string;
  dtype: "F32" | "F16" | "BF16";
  shape: number[];
  data: Uint8Array;
}

/** A safetensors file as the format defines it (the test's own writer). */
function writeSafetensors(path: string, tensors: Tensor[]): void {
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let at = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + t.data.length] };
    at += t.data.length;
  }
  const json = Buffer.from(JSON.stringify(header));
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(path, Buffer.concat([size, json, ...tensors.map((t) => Buffer.from(t.data))]));
}

const f32 = (values: Float32Array) => new Uint8Array(values.buffer, values.byteOffset, values.byteLength);

/** The synthetic GGUF's weights under transformers' names, Q/K rows un-permuted, as F32. */
function ggufAsHfTensors(ggufPath: string): Tensor[] {
  const file = openGguf(ggufPath);
  try {
    const pairs: [keyof TensorNames, number | undefined][] = [
      ["embedding", undefined],
      ["outputNorm", undefined],
    ];
    for (let l = 0; l < SYNTHETIC.layers; l++)
      for (const k of ["q", "k", "v", "attnOutput", "gate", "up", "down", "attnNorm", "ffnNorm"] as const)
        pairs.push([k, l]);
    const name = (names: TensorNames, key: keyof TensorNames, layer?: number) => {
      const n = names[key];
      return typeof n === "string" ? n : n(layer!);
    };
    return pairs.map(([key, layer]) => {
      const info = file.tensor(name(GGUF_TENSOR_NAMES, key, layer))!;
      let values = file.dequantize(info);
      const heads = key === "q" ? SYNTHETIC.heads : key === "k" ? SYNTHETIC.kvHeads : 0;
      if (heads)
        values = new Float32Array(unpermuteLlamaRows(f32(values), info.dims[1]!, heads).buffer.slice(0));
      const shape = info.dims.length === 2 ? [info.dims[1]!, info.dims[0]!] : [info.dims[0]!];
      return {
        name: name(HF_LLAMA_TENSOR_NAMES, key, layer),
        dtype: "F32" as const,
        shape,
        data: f32(values),
      };
    });
  } finally {
    file.close();
  }
}

let root: string;
let models: string;
let run: string;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "ortserve-import-"));
  models = join(root, "models");
  mkdirSync(models);
  const { modelDir } = await buildSyntheticModel(models, ["fp32"], "tiny");
  run = join(root, "run");
  mkdirSync(run);
  const baseConfig = readFileSync(join(modelDir, "config.json"), "utf8");
  for (const step of [100, 200]) {
    const ckpt = join(run, `checkpoint-${step}`);
    mkdirSync(ckpt);
    const gguf = writeSyntheticGguf(join(root, `seed-${step}.gguf`), step);
    writeSafetensors(join(ckpt, "model.safetensors"), ggufAsHfTensors(gguf));
    writeFileSync(join(ckpt, "config.json"), baseConfig);
    writeFileSync(
      join(ckpt, "trainer_state.json"),
      JSON.stringify({
        global_step: step,
        log_history: [
          { step: 100, loss: 2.5, learning_rate: 5e-5, epoch: 0.5, grad_norm: 1.25 },
          { step: 100, eval_loss: 2.75, eval_runtime: 3.5 },
          ...(step === 200 ? [{ step: 200, loss: 2.0, learning_rate: 4e-5, epoch: 1.0 }] : []),
        ],
      }),
    );
  }
  writeSyntheticGguf(join(run, "step-300.gguf"), 300);
  writeFileSync(join(run, "notes.txt"), "not a checkpoint");
  // The reference: the step-100 weights converted from their GGUF by `convert`.
  await convertGguf(join(root, "seed-100.gguf"), join(models, "reference-100"), { format: "fp32" });
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe("safetensors reader", () => {
  it("reads F32, F16 and BF16 tensors as float32", () => {
    const dir = join(root, "st");
    mkdirSync(dir);
    const f16 = new Uint8Array(new Uint16Array([0x3c00, 0xc000, 0x3800]).buffer); // 1, -2, 0.5
    const bf16 = new Uint8Array(new Uint16Array([0x3f80, 0xc040]).buffer); // 1, -3
    writeSafetensors(join(dir, "a.safetensors"), [
      { name: "x", dtype: "F32", shape: [2], data: f32(new Float32Array([1.5, -0.25])) },
      { name: "h", dtype: "F16", shape: [3], data: f16 },
    ]);
    writeSafetensors(join(dir, "b.safetensors"), [{ name: "b", dtype: "BF16", shape: [1, 2], data: bf16 }]);
    const set = openSafetensors(dir);
    try {
      expect(set.names().sort()).toEqual(["b", "h", "x"]);
      expect([...set.floats(set.tensor("x")!)]).toEqual([1.5, -0.25]);
      expect([...set.floats(set.tensor("h")!)]).toEqual([1, -2, 0.5]);
      expect([...set.floats(set.tensor("b")!)]).toEqual([1, -3]);
      expect(set.tensor("b")!.shape).toEqual([1, 2]);
    } finally {
      set.close();
    }
  });
});

describe("training run discovery", () => {
  it("finds Trainer folders and step-named GGUF files, with each step's logged metrics", () => {
    const found = discoverCheckpoints(run);
    expect(found.map((c) => [c.step, c.kind])).toEqual([
      [100, "safetensors"],
      [200, "safetensors"],
      [300, "gguf"],
    ]);
    expect(trainerMetrics(run, found[0]!)).toEqual({
      loss: 2.5,
      learning_rate: 5e-5,
      epoch: 0.5,
      grad_norm: 1.25,
      eval_loss: 2.75,
      eval_runtime: 3.5,
    });
    expect(trainerMetrics(run, found[1]!)).toEqual({ loss: 2.0, learning_rate: 4e-5, epoch: 1.0 });
    expect(trainerMetrics(run, found[2]!)).toEqual({});
  });
});

describe("checkpoint import", () => {
  it("imports every checkpoint once, with metrics, and computes what the same weights from GGUF compute", async () => {
    const first = await importTrainingRun({
      runDir: run,
      modelId: "tiny",
      modelsDir: models,
      format: "fp32",
    });
    expect(first.imported.map((c) => c.step)).toEqual([100, 200, 300]);
    expect(first.skipped).toEqual([]);
    const again = await importTrainingRun({
      runDir: run,
      modelId: "tiny",
      modelsDir: models,
      format: "fp32",
    });
    expect(again).toEqual({ imported: [], skipped: [100, 200, 300] });
    // Nothing half-built is left behind.
    expect(readdirSync(join(models, "tiny", "checkpoints")).sort()).toEqual([
      "step-100",
      "step-200",
      "step-300",
    ]);

    const registry = ModelRegistry.load(models);
    const listed = registry.get("tiny")!.checkpoints;
    expect(listed.map((c) => [c.step, c.format])).toEqual([
      [100, "fp32"],
      [200, "fp32"],
      [300, "fp32"],
    ]);
    expect(listed[0]!.metrics).toMatchObject({ loss: 2.5, eval_loss: 2.75 });
    expect(new Set(listed.map((c) => c.id)).size).toBe(3);

    const engine = await Engine.open({ registry, workers: 1, threads: 1 });
    try {
      const prompt = { tokenIds: [1, 40, 41, 42, 7, 99, 150] };
      const imported = await engine.score({ model: "tiny:step100", prompt, logits: true });
      const reference = await engine.score({ model: "reference-100", prompt, logits: true });
      expect(imported.logits!.length).toBe(prompt.tokenIds.length * reference.vocabSize);
      expect(imported.logits).toEqual(reference.logits);
      // A different step's weights compute something else.
      const other = await engine.score({ model: "tiny:step200", prompt, logits: true });
      expect(other.logits).not.toEqual(reference.logits);
    } finally {
      await engine.close();
    }
  });

  it("imports safetensors as 4-bit weights for a q4 model", async () => {
    await buildSyntheticModel(models, ["fp32"], "tiny-q4");
    const r = await importTrainingRun({ runDir: run, modelId: "tiny-q4", modelsDir: models, format: "q4" });
    expect(r.imported.map((c) => c.step)).toEqual([100, 200, 300]);
    const registry = ModelRegistry.load(models);
    expect(registry.get("tiny-q4")!.checkpoints.map((c) => c.format)).toEqual(["q4", "q4", "q4"]);
    const engine = await Engine.open({ registry, workers: 1, threads: 1 });
    try {
      const s = await engine.score({ model: "tiny-q4:step100", prompt: { tokenIds: [1, 40, 41, 42] } });
      expect(
        s.promptLogprobs.slice(1).every((p) => p !== null && Number.isFinite(p.entries[0]!.logprob)),
      ).toBe(true);
    } finally {
      await engine.close();
    }
  });
});
