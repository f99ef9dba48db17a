/**
 * Corrupt and half-written model directories are reported when the server starts and skipped,
 * while a good model next to them serves. Each broken copy is the real synthetic model with one
 * file damaged: config.json not JSON, config.json missing a required number, tokenizer.json
 * missing, the ONNX file cut in half, the external weights cut short.
 */
import { cpSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelRegistry } from "../../src/models/registry.ts";
import { addSyntheticModel, chat, get, type Harness, startHarness, tinyRequest } from "./harness.ts";

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
    expect(models).toEqual(["tiny"]);
    const ok = await chat(h, tinyRequest({ max_tokens: 2 }));
    expect(ok.status, ok.text).toBe(200);
    for (const name of Object.keys(BROKEN)) expect((await chat(h, tinyRequest({}, name))).status).toBe(404);
  });
});
