/**
 * DELETE /v1/preview/models/{model_id}/checkpoints on a running server: a checkpoint in use keeps
 * its files until the request using it finishes, while it is unlisted and unresolvable at once;
 * then its engine is freed and its directory deleted. Plus the body's errors, and the CLI's
 * offline `checkpoint remove`.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { removeCheckpoints } from "../../src/cli/commands/checkpoint.ts";
import type { EngineEvent } from "../../src/core/types.ts";
import { addCheckpoint } from "../../src/models/checkpoint-install.ts";
import { ModelRegistry } from "../../src/models/registry.ts";
import { writeSyntheticGguf } from "../fixtures/synthetic-model.ts";
import {
  addListingOnlyModel,
  addSyntheticModel,
  bearer,
  chat,
  expectApiError,
  get,
  type Harness,
  newCheckpoint,
  reply,
  startHarness,
  tinyRequest,
  writeCheckpointMeta,
} from "./harness.ts";

interface Page {
  data: { id: string; step: number }[];
}

let h: Harness;

beforeAll(async () => {
  h = await startHarness(async (models, root) => {
    await addSyntheticModel(models, "tiny");
    for (const step of [10, 20, 30]) {
      const gguf = writeSyntheticGguf(join(root, `tiny-${step}.gguf`), step);
      await addCheckpoint({ modelId: "tiny", ggufPath: gguf, step, modelsDir: models, format: "fp32" });
    }
    const listed = addListingOnlyModel(models, "listed");
    for (const step of [1, 2, 3]) writeCheckpointMeta(listed, `c${step}`, newCheckpoint(step));
  });
});

afterAll(async () => {
  await h?.dispose();
});

function remove(model: string, body: unknown, headers: Record<string, string> = bearer(h)) {
  return fetch(`${h.url}/v1/preview/models/${encodeURIComponent(model)}/checkpoints`, {
    method: "DELETE",
    headers: { "Content-Type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  }).then((r) => reply<{ deleted_count: number; not_found_steps: number[] }>(r));
}

const steps = async (model: string) =>
  (await get<Page>(h, `/v1/preview/models/${model}/checkpoints`)).json.data.map((c) => c.step);

const checkpointDir = (step: number) => join(h.modelsDir, "tiny", "checkpoints", `step-${step}`);

describe("DELETE /v1/preview/models/{model_id}/checkpoints", () => {
  it("unlists at once, keeps the files while a request uses them, then frees the engine and deletes", async () => {
    const engine = h.server.engine;
    const dir = checkpointDir(30);
    // A request on step 30 (the latest, so also what "tiny" means), held open mid-stream.
    const prepared = await engine.prepare({
      model: "tiny:step30",
      prompt: { tokenIds: [5, 6, 7] },
      params: { maxTokens: 20, sampling: { temperature: 0, ignoreEos: true } },
    });
    const stream = engine.stream(prepared);
    const first = await stream.next();
    expect((first.value as EngineEvent).type).toBe("prompt");
    expect(Object.keys(await engine.stats()).some((k) => k.includes(dir))).toBe(true);

    const r = await remove("tiny", { steps: [30, 99, 30] });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ deleted_count: 1, not_found_steps: [99] });

    // Gone from every name at once; "tiny" now means step 20.
    expect(await steps("tiny")).toEqual([10, 20]);
    expectApiError(await chat(h, tinyRequest({ model: "tiny:step30" })), 404, { code: "model_not_found" });
    const models = (await get<{ data: { id: string }[] }>(h, "/v1/models")).json.data.map((m) => m.id);
    expect(models).not.toContain("tiny:step30");
    expect(engine.registry.resolve("tiny")?.checkpoint?.step).toBe(20);

    // The request still running keeps the weights on disk, only checkpoint.json is renamed.
    expect(readdirSync(dir).sort()).toContain("checkpoint.removed.json");
    expect(existsSync(join(dir, "checkpoint.json"))).toBe(false);
    expect(existsSync(join(dir, "onnx"))).toBe(true);
    const rest: EngineEvent[] = [];
    for await (const e of stream) rest.push(e);
    expect(rest.at(-1)).toEqual({ type: "done" });
    const tokens = rest.flatMap((e) => (e.type === "delta" ? e.tokenIds : []));
    expect(tokens).toHaveLength(20);

    // Once it finished: the engine is closed in its worker and the directory deleted.
    await vi.waitFor(() => expect(existsSync(dir)).toBe(false), { timeout: 30_000, interval: 50 });
    expect(Object.keys(await engine.stats()).some((k) => k.includes(dir))).toBe(false);
    expect(readdirSync(join(h.modelsDir, "tiny", "checkpoints")).sort()).toEqual(["step-10", "step-20"]);
    // The remaining checkpoints still serve.
    expect((await chat(h, tinyRequest({ model: "tiny:step20" }))).status).toBe(200);
  });

  it("removes checkpoints that were never loaded, and a restart does not bring any back", async () => {
    const r = await remove("listed", { steps: [1, 3] });
    expect(r.json).toEqual({ deleted_count: 2, not_found_steps: [] });
    expect(await steps("listed")).toEqual([2]);
    await vi.waitFor(() => expect(readdirSync(join(h.modelsDir, "listed", "checkpoints"))).toEqual(["c2"]), {
      timeout: 30_000,
      interval: 50,
    });
    const again = await remove("listed", { steps: [1] });
    expect(again.json).toEqual({ deleted_count: 0, not_found_steps: [1] });
    const reloaded = ModelRegistry.load(h.modelsDir);
    expect(reloaded.get("listed")!.checkpoints.map((c) => c.step)).toEqual([2]);
    expect(reloaded.get("tiny")!.checkpoints.map((c) => c.step)).toEqual([10, 20]);
  });

  it("refuses a bad body with a 400 naming the field, an unknown model with a 404, no key with a 401", async () => {
    expectApiError(await remove("tiny", {}), 400, { param: "steps", code: "missing_required_parameter" });
    expectApiError(await remove("tiny", { steps: [] }), 400, { param: "steps" });
    expectApiError(await remove("tiny", { steps: [-1] }), 400, { param: "steps[0]" });
    expectApiError(await remove("tiny", { steps: ["10"] }), 400, { param: "steps[0]", code: "invalid_type" });
    expectApiError(await remove("tiny", { steps: [10], force: true }), 400, { code: "unknown_parameter" });
    expectApiError(await remove("tiny", "[10]"), 400, { code: "invalid_type" });
    expectApiError(await remove("nope", { steps: [1] }), 404, { code: "model_not_found" });
    expectApiError(await remove("tiny", { steps: [10] }, {}), 401);
    expect(await steps("tiny")).toEqual([10, 20]);
  });
});

describe("ortserve checkpoint remove (offline)", () => {
  it("deletes the checkpoints of the given steps and reports the others", () => {
    const models = join(h.root, "offline-models");
    const model = addListingOnlyModel(models, "m");
    for (const step of [5, 6]) writeCheckpointMeta(model, `s${step}`, newCheckpoint(step));
    const { removed, notFound } = removeCheckpoints("m", [6, 7], models);
    expect(removed.map((c) => c.step)).toEqual([6]);
    expect(notFound).toEqual([7]);
    expect(readdirSync(join(model, "checkpoints"))).toEqual(["s5"]);
    expect(() => removeCheckpoints("absent", [1], models)).toThrow(/no model "absent"/);
  });
});
