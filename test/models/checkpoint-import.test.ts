/**
 * `checkpoint import` on a synthetic training run written here: Trainer checkpoint-<step>/ folders
 * whose safetensors hold the weights of a synthetic GGUF (renamed to transformers' names, Q/K rows
 * back in Hugging Face order), a GGUF named by step, and trainer_state.json. The imported
 * checkpoint must compute exactly what the same weights converted from the GGUF compute.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importTrainingRun } from "../../src/cli/commands/checkpoint-import.ts";
import { Engine } from "../../src/engine/engine.ts";
import { convertGguf } from "../../src/models/convert/convert.ts";
import { discoverCheckpoints, trainerMetrics } from "../../src/models/import/training-run.ts";
import { ModelRegistry } from "../../src/models/registry.ts";
import { openSafetensors } from "../../src/models/safetensors/reader.ts";
import { buildSyntheticModel, writeSyntheticGguf } from "../fixtures/synthetic-model.ts";
import { f32, writeSafetensors, writeTrainingRun } from "../fixtures/training-run.ts";

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
  writeTrainingRun(run, root, modelDir, [100, 200]);
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
      loss: 3,
      learning_rate: 5e-5,
      epoch: 0.5,
      grad_norm: 1.25,
      eval_loss: 2.75,
      eval_runtime: 3.5,
    });
    expect(trainerMetrics(run, found[1]!)).toEqual({
      loss: 2.5,
      learning_rate: 4e-5,
      epoch: 1,
      grad_norm: 1.25,
    });
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
    expect(listed[0]!.metrics).toMatchObject({ loss: 3, eval_loss: 2.75 });
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
