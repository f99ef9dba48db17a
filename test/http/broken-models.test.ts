/**
 * Corrupt and half-written model directories are reported when the server starts and skipped,
 * while a good model next to them serves. Each broken copy is the real synthetic model with one
 * file damaged: config.json not JSON, config.json missing a required number, tokenizer.json
 * missing, the ONNX file cut in half, the external weights cut short. A checkpoint of the good
 * model with cut-short weights stays listed but is not servable, and the model's other checkpoint
 * still serves.
 */
import { cpSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelRegistry } from "../../src/models/registry.ts";
import {
  addSyntheticModel,
  chat,
  get,
  type Harness,
  newCheckpoint,
  startHarness,
  tinyRequest,
  writeCheckpointMeta,
} from "./harness.ts";

/** Broken copy name → how it is damaged, and the words its reason must contain. */
const BROKEN: Record<string, { damage: (dir: string) => void; reason: RegExp }> = {
  "bad-config-json": {
    damage: (dir) => writeFileSync(join(dir, "config.json"), '{"num_hidden_layers": 2,'),
    reason: /invalid model config/,
  },
  "config-missing-field": {
    damage: (dir) => {
      const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
      delete cfg.num_hidden_layers;
      writeFileSync(join(dir, "config.json"), JSON.stringify(cfg));
    },
    reason: /num_hidden_layers/,
  },
  "no-tokenizer": {
    damage: (dir) => rmSync(join(dir, "tokenizer.json")),
    reason: /tokenizer\.json is missing/,
  },
  "truncated-onnx": {
    damage: (dir) => {
      const path = join(dir, "onnx", "model.onnx");
      truncateSync(path, Math.floor(statSync(path).size / 2));
    },
    reason: /truncated|cut off/,
  },
  "truncated-weights": {
    damage: (dir) => {
      const path = join(dir, "onnx", "model.onnx_data");
      truncateSync(path, Math.floor(statSync(path).size / 2));
    },
    reason: /model\.onnx_data has \d+ bytes.*truncated/,
  },
};

let h: Harness;

beforeAll(async () => {
  h = await startHarness(
    async (modelsDir) => {
      const good = await addSyntheticModel(modelsDir, "tiny");
      for (const [name, { damage }] of Object.entries(BROKEN)) {
        const dir = join(modelsDir, name);
        cpSync(good, dir, { recursive: true });
        damage(dir);
      }
      // Step 2 (the latest, which "tiny" names) is a whole copy of the weights; step 1 the same with
      // its external data cut short.
      for (const step of [1, 2]) {
        const dir = join(good, "checkpoints", `step-${step}`);
        for (const f of [
          "config.json",
          "generation_config.json",
          "tokenizer.json",
          "tokenizer_config.json",
          "onnx",
        ])
          cpSync(join(good, f), join(dir, f), { recursive: true });
        writeCheckpointMeta(good, `step-${step}`, newCheckpoint(step));
      }
      const cut = join(good, "checkpoints", "step-1", "onnx", "model.onnx_data");
      truncateSync(cut, Math.floor(statSync(cut).size / 2));
    },
    { checkModelFiles: true },
  );
});
afterAll(() => h?.dispose());

describe("broken model directories at start", () => {
  it("names each broken directory and what is wrong with it", () => {
    const registry = ModelRegistry.load(h.modelsDir, { checkFiles: true });
    expect(registry.list().map((m) => m.id)).toEqual(["tiny"]);
    const reasons = new Map(registry.unavailable.map((u) => [u.id, u.reason]));
    expect([...reasons.keys()].sort()).toEqual(Object.keys(BROKEN).sort());
    for (const [name, { reason }] of Object.entries(BROKEN)) expect(reasons.get(name)).toMatch(reason);
  });

  it("serves the good model and none of the broken ones", async () => {
    const models = (await get<{ data: { id: string }[] }>(h, "/v1/models")).json.data.map((m) => m.id);
    expect(models).toEqual(["tiny", "tiny:step2"]);
    const ok = await chat(h, tinyRequest({ max_tokens: 2 }));
    expect(ok.status, ok.text).toBe(200);
    for (const name of Object.keys(BROKEN)) expect((await chat(h, tinyRequest({}, name))).status).toBe(404);
  });

  it("lists a checkpoint with broken weights as not servable, with a warning, and serves the others", async () => {
    const registry = ModelRegistry.load(h.modelsDir, { checkFiles: true });
    const steps = registry.get("tiny")!.checkpoints.map((c) => [c.step, c.format]);
    expect(steps).toEqual([
      [1, undefined],
      [2, expect.any(String)],
    ]);
    expect(registry.warnings.join("\n")).toMatch(/step-1: checkpoint step 1 not servable: .*truncated/);
    const listed = await get<{ data: { step: number }[] }>(h, "/v1/preview/models/tiny/checkpoints");
    expect(listed.json.data.map((c) => c.step).sort()).toEqual([1, 2]);
    expect((await chat(h, tinyRequest({ max_tokens: 2 }, "tiny:step2"))).status).toBe(200);
    const refused = await chat(h, tinyRequest({ max_tokens: 2 }, "tiny:step1"));
    expect(refused.status).toBe(503);
    expect(refused.text).toMatch(/start-time check/);
    expect(refused.text).not.toContain(h.modelsDir);
  });
});
