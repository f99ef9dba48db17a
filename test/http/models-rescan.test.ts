/**
 * Models that change while the server runs: a model directory renamed in (as `ortserve pull` does)
 * is served by its first request and listed; one pulled again at the same path serves its new
 * weights once rescanned, the old engine freed; one removed is a 404 and leaves the listing; and
 * the periodic scan notices a new model without any request naming it.
 */
import { mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { convertGguf } from "../../src/models/convert/convert.ts";
import { writeSyntheticGguf } from "../fixtures/synthetic-model.ts";
import { addSyntheticModel, chat, get, type Harness, startHarness, tinyRequest } from "./harness.ts";

interface Completion {
  choices: { message: { content: string } }[];
}
interface ModelList {
  data: { id: string }[];
}

/** Converts the synthetic model of `seed` into a hidden staging directory and renames it in as `<modelsDir>/<id>`. */
async function pullIn(h: Harness, id: string, seed: number): Promise<void> {
  const staging = join(h.root, `.staging-${id}-${seed}`);
  mkdirSync(staging);
  const gguf = writeSyntheticGguf(join(staging, "model.gguf"), seed);
  await convertGguf(gguf, join(staging, id), { format: "fp32", accuracyLevel: 4 });
  const target = join(h.modelsDir, id);
  // As pull --force swaps a model: the old directory aside, the new one in, the old one deleted.
  const aside = join(h.root, `.aside-${id}-${seed}`);
  try {
    renameSync(target, aside);
  } catch {
    // Nothing to replace.
  }
  renameSync(join(staging, id), target);
  rmSync(aside, { recursive: true, force: true });
  rmSync(staging, { recursive: true, force: true });
}

const greedy = (model: string) => tinyRequest({ max_tokens: 12, temperature: 0 }, model);
const listed = async (h: Harness) => (await get<ModelList>(h, "/v1/models")).json.data.map((m) => m.id);

describe("models changed while serving (rescans on a miss only)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness((models) => addSyntheticModel(models, "tiny").then(() => undefined), {
      modelsRescanMs: 0,
    });
  });
  afterAll(async () => {
    await h?.dispose();
  });

  it("serves a model renamed in by its first request, then serves its replacement and forgets it once removed", async () => {
    expect(await listed(h)).toEqual(["tiny"]);
    const tiny = await chat<Completion>(h, greedy("tiny"));
    expect(tiny.status).toBe(200);

    // Seed 2 differs from tiny's weights (seed 1): its greedy answer differs.
    await pullIn(h, "later", 2);
    const first = await chat<Completion>(h, greedy("later"));
    expect(first.status, first.text).toBe(200);
    expect(first.json.choices[0]!.message.content).not.toBe(tiny.json.choices[0]!.message.content);
    expect(await listed(h)).toEqual(["later", "tiny"]);

    // Pulled again with tiny's weights at the same path: until a scan the old engine answers; after it, the new files.
    await pullIn(h, "later", 1);
    const change = await h.server.engine.refreshModels();
    expect(change.added).toEqual([]);
    expect(change.removed).toEqual([]);
    expect(change.gone.map((g) => g.dir)).toEqual([join(h.modelsDir, "later")]);
    const replaced = await chat<Completion>(h, greedy("later"));
    expect(replaced.status).toBe(200);
    expect(replaced.json.choices[0]!.message.content).toBe(tiny.json.choices[0]!.message.content);
    // The old revision's engine is freed once its requests are done: one engine of "later" is left.
    const laterEngines = async () =>
      Object.keys(await h.server.engine.stats()).filter(
        (key) => (JSON.parse(key) as { modelDir: string }).modelDir === join(h.modelsDir, "later"),
      );
    let engines = await laterEngines();
    for (let i = 0; i < 100 && engines.length > 1; i++) {
      await new Promise((r) => setTimeout(r, 20));
      engines = await laterEngines();
    }
    expect(engines).toHaveLength(1);

    rmSync(join(h.modelsDir, "later"), { recursive: true });
    expect((await h.server.engine.refreshModels()).removed).toEqual(["later"]);
    const gone = await chat<{ error: { code: string } }>(h, greedy("later"));
    expect(gone.status).toBe(404);
    expect(await listed(h)).toEqual(["tiny"]);
  });

  it("lets a request preparing its prompt finish when its model is replaced, and refuses one that starts after with a 503", async () => {
    const engine = h.server.engine;
    await pullIn(h, "swap", 4);
    await engine.refreshModels();
    const old = engine.model("swap");
    const messages = [{ role: "user" as const, content: "Say something." }];
    const prepared = await engine.prepare({ model: "swap", prompt: { messages }, params: { maxTokens: 2 } });

    // Replaced while a prompt is being made for the old files: the old revision is let go of only
    // once that prompt is made, which succeeds.
    await pullIn(h, "swap", 5);
    const preparing = engine.prompt(old, { messages });
    const [prompt, change] = await Promise.all([preparing, engine.refreshModels()]);
    expect(change.gone.map((g) => g.dir)).toEqual([join(h.modelsDir, "swap")]);
    expect("text" in prompt && prompt.text.length).toBeGreaterThan(0);

    // A request resolved to the old revision that starts now would run the new files under the
    // old one's name: it is refused, and tells the client to send it again.
    await expect(engine.generate(prepared)).rejects.toMatchObject({ status: 503 });
    await expect(engine.generate(prepared)).rejects.toThrow(/swap was replaced .* send it again/);
    await expect(engine.tokenize(old, { text: "hello", addSpecialTokens: true })).rejects.toMatchObject({
      status: 503,
    });
    // The new revision serves.
    const fresh = await engine.generate({ model: "swap", prompt: { messages }, params: { maxTokens: 2 } });
    expect(fresh.choices[0]!.tokenIds.length).toBeGreaterThan(0);
    rmSync(join(h.modelsDir, "swap"), { recursive: true });
    await engine.refreshModels();
  });
});

describe("models changed while serving (periodic rescan)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness((models) => addSyntheticModel(models, "tiny").then(() => undefined), {
      modelsRescanMs: 50,
    });
  });
  afterAll(async () => {
    await h?.dispose();
  });

  it("lists a model renamed in without any request naming it", async () => {
    await pullIn(h, "pulled", 3);
    let ids = await listed(h);
    for (let i = 0; i < 200 && !ids.includes("pulled"); i++) {
      await new Promise((r) => setTimeout(r, 50));
      ids = await listed(h);
    }
    expect(ids).toEqual(["pulled", "tiny"]);
  });
});
