import { mkdirSync, renameSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelRegistry, revisionOf } from "../../src/models/registry.ts";
import { tempModelsDir, writeCheckpoint, writeModel } from "./fixtures.ts";

const U = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const roots: string[] = [];
function fresh(): string {
  const dir = tempModelsDir();
  roots.push(dir);
  return dir;
}
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

describe("ModelRegistry.load: models", () => {
  let root: string;
  let reg: ModelRegistry;
  beforeAll(() => {
    root = fresh();
    writeModel(root, "with-meta", {
      formats: ["q4", "fp32"],
      meta: {
        id: "custom-id",
        format: "fp32",
        scheduling_policy: "priority",
        tool_parser: "hermes",
        structured_outputs: { disable_any_whitespace: true },
        max_model_len: 512,
        created: 1700000000.7,
      },
    });
    const plain = writeModel(root, "plain");
    utimesSync(plain, 1600000000, 1600000000);
    writeModel(root, "fp32-only", { formats: ["fp32"] });
    writeModel(root, "fallback", { formats: ["fp32"], meta: { format: "q4" } });
    writeModel(root, "unconverted", { formats: [], meta: { id: "unconverted", format: "q4" } });
    writeModel(root, "config-only", { formats: [], config: true });
    writeModel(root, "weights-no-config", { formats: ["q4"], config: false });
    writeModel(root, "bad-json", { meta: {} });
    writeFileSync(join(root, "bad-json", "ortserve.json"), "{ nope");
    writeModel(root, "bad-policy", { meta: { scheduling_policy: "lifo" } });
    writeModel(root, "bad-len", { meta: { max_model_len: 0 } });
    writeModel(root, "bad-parser", { meta: { tool_parser: "mistral" } });
    writeModel(root, "bad-budget", { meta: { thinking_token_budget: 64 } });
    writeModel(root, "bad-format", { meta: { format: "int3" } });
    writeModel(root, "bad-so-shape", { meta: { structured_outputs: true } });
    writeModel(root, "bad-so-value", { meta: { structured_outputs: { disable_any_whitespace: "yes" } } });
    writeModel(root, "bad-so-key", { meta: { structured_outputs: { disable_any_whitespaces: true } } });
    writeModel(root, "so-empty", { meta: { structured_outputs: {} } });
    writeModel(root, "bad-id", { meta: { id: "x:step3" } });
    writeModel(root, "dup-a", { meta: { id: "dup" } });
    writeModel(root, "dup-b", { meta: { id: "dup" } });
    writeModel(root, "llama:8b");
    mkdirSync(join(root, ".hidden"));
    writeFileSync(join(root, "README.md"), "not a model");
    reg = ModelRegistry.load(root);
  });

  it("serves converted models with ortserve.json settings or defaults", () => {
    expect(reg.list().map((m) => m.id)).toEqual([
      "custom-id",
      "dup",
      "fallback",
      "fp32-only",
      "llama:8b",
      "plain",
      "so-empty",
    ]);
    expect(reg.get("custom-id")).toEqual({
      id: "custom-id",
      dir: join(root, "with-meta"),
      format: "fp32",
      schedulingPolicy: "priority",
      toolParser: "hermes",
      structuredOutputs: { disableAnyWhitespace: true },
      maxModelLen: 512,
      created: 1700000000,
      checkpoints: [],
    });
    const plain = reg.get("plain")!;
    expect(plain).toMatchObject({ id: "plain", format: "q4", schedulingPolicy: "fcfs", created: 1600000000 });
    expect(plain).not.toHaveProperty("maxModelLen");
    expect(plain).not.toHaveProperty("toolParser");
    expect(plain).not.toHaveProperty("structuredOutputs");
    // An empty structured_outputs changes nothing: any whitespace, as without one.
    expect(reg.get("so-empty")!.structuredOutputs).toEqual({ disableAnyWhitespace: false });
    expect(reg.get("fp32-only")!.format).toBe("fp32");
    expect(reg.get("with-meta")).toBeUndefined();
  });

  it("falls back to the weights that exist, with a warning", () => {
    expect(reg.get("fallback")!.format).toBe("fp32");
    expect(reg.warnings.some((w) => w.startsWith(join(root, "fallback")) && w.includes("serving fp32"))).toBe(
      true,
    );
  });

  it("reports directories it cannot serve, with the reason", () => {
    const why = Object.fromEntries(reg.unavailable.map((u) => [u.dir.slice(root.length + 1), u.reason]));
    expect(Object.keys(why).sort()).toEqual([
      "bad-budget",
      "bad-format",
      "bad-id",
      "bad-json",
      "bad-len",
      "bad-parser",
      "bad-policy",
      "bad-so-key",
      "bad-so-shape",
      "bad-so-value",
      "config-only",
      "dup-b",
      "unconverted",
      "weights-no-config",
    ]);
    expect(why.unconverted).toMatch(/^not converted: run `npm run setup-model`/);
    expect(why["config-only"]).toContain("no onnx/model_q4.onnx or onnx/model.onnx");
    expect(why["weights-no-config"]).toMatch(/^not converted/);
    expect(why["bad-json"]).toMatch(/^invalid ortserve.json: /);
    expect(why["bad-policy"]).toContain("scheduling_policy");
    expect(why["bad-len"]).toContain("max_model_len");
    expect(why["bad-parser"]).toContain('"tool_parser" must be one of hermes');
    expect(why["bad-format"]).toContain('"format"');
    expect(why["bad-budget"]).toContain('"thinking_token_budget" needs a "reasoning_parser"');
    expect(why["bad-id"]).toContain(":step<N>");
    expect(why["bad-so-shape"]).toContain(
      '"structured_outputs" must be an object such as {"disable_any_whitespace": true}',
    );
    expect(why["bad-so-value"]).toContain(
      '"structured_outputs.disable_any_whitespace" must be true or false',
    );
    expect(why["bad-so-key"]).toContain('"structured_outputs" has unknown keys "disable_any_whitespaces"');
    expect(why["dup-b"]).toContain(`already served from ${join(root, "dup-a")}`);
    expect(reg.unavailable.find((u) => u.dir.endsWith("unconverted"))!.id).toBe("unconverted");
  });

  it("survives a missing models directory", () => {
    const r = ModelRegistry.load(join(root, "no-such-dir"));
    expect(r.list()).toEqual([]);
    expect(r.warnings[0]).toContain("cannot read models directory");
  });
});

describe("ModelRegistry.load: checkpoints", () => {
  let root: string;
  let dir: string;
  let reg: ModelRegistry;
  beforeAll(() => {
    root = fresh();
    dir = writeModel(root, "m");
    // Directory names sort differently from steps: order must come from the metadata.
    writeCheckpoint(
      dir,
      "b-late",
      { id: U(1), step: 100, metrics: { loss: 0.5, acc: 0.9 }, created: 1700000100 },
      ["q4"],
    );
    writeCheckpoint(dir, "a-early", { id: U(2), step: 5, metrics: {} }, ["fp32"]);
    const noCreated = writeCheckpoint(dir, "c-meta-only", { id: U(3).toUpperCase(), step: 50 });
    utimesSync(join(noCreated, "checkpoint.json"), 1650000000, 1650000000);
    mkdirSync(join(dir, "checkpoints", "no-json"));
    mkdirSync(join(dir, "checkpoints", ".step-7.partial-123"));
    writeCheckpoint(dir, "bad-json", "{");
    writeCheckpoint(dir, "no-id", { step: 1 });
    writeCheckpoint(dir, "not-uuid", { id: "checkpoint-1", step: 2 });
    writeCheckpoint(dir, "dup-id-1", { id: U(9), step: 10 });
    writeCheckpoint(dir, "dup-id-2", { id: U(9), step: 11 });
    writeCheckpoint(dir, "dup-step-1", { id: U(20), step: 30 });
    writeCheckpoint(dir, "dup-step-2", { id: U(21), step: 30 });
    writeCheckpoint(dir, "neg-step", { id: U(30), step: -1 });
    writeCheckpoint(dir, "frac-step", { id: U(31), step: 1.5 });
    writeCheckpoint(dir, "string-step", { id: U(32), step: "3" });
    writeCheckpoint(dir, "string-metric", { id: U(33), step: 4, metrics: { loss: "1.2" } });
    writeCheckpoint(dir, "array-metrics", { id: U(34), step: 6, metrics: [1] });
    writeCheckpoint(dir, "bad-created", { id: U(35), step: 8, created: "yesterday" });
    reg = ModelRegistry.load(root);
  });

  it("keeps valid checkpoints sorted by step", () => {
    const m = reg.get("m")!;
    expect(m.checkpoints).toEqual([
      {
        id: U(2),
        step: 5,
        metrics: {},
        dir: join(dir, "checkpoints", "a-early"),
        created: expect.any(Number),
        format: "fp32",
      },
      {
        id: U(3),
        step: 50,
        metrics: {},
        dir: join(dir, "checkpoints", "c-meta-only"),
        created: 1650000000,
        format: undefined,
      },
      {
        id: U(1),
        step: 100,
        metrics: { loss: 0.5, acc: 0.9 },
        dir: join(dir, "checkpoints", "b-late"),
        created: 1700000100,
        format: "q4",
      },
    ]);
  });

  it("skips each bad checkpoint with a warning naming its directory", () => {
    const skipped = (name: string) =>
      reg.warnings.find((w) => w.startsWith(`${join(dir, "checkpoints", name)}: checkpoint skipped`));
    expect(skipped("no-json")).toContain("no checkpoint.json");
    expect(skipped("bad-json")).toBeDefined();
    expect(skipped("no-id")).toContain('"id" must be a UUID');
    expect(skipped("not-uuid")).toContain('"id" must be a UUID');
    expect(skipped("dup-id-1")).toContain("is used by another checkpoint");
    expect(skipped("dup-id-2")).toContain("is used by another checkpoint");
    expect(skipped("dup-step-1")).toContain("step 30 is used by another");
    expect(skipped("dup-step-2")).toContain("step 30 is used by another");
    for (const name of ["neg-step", "frac-step", "string-step"]) expect(skipped(name)).toContain('"step"');
    for (const name of ["string-metric", "array-metrics"]) expect(skipped(name)).toContain('"metrics"');
    expect(skipped("bad-created")).toContain('"created"');
    expect(reg.warnings.some((w) => w.includes(".step-7"))).toBe(false);
    expect(reg.warnings.some((w) => w.includes("not servable") && w.includes("step 50"))).toBe(true);
    expect(reg.get("m")!.checkpoints.map((c) => c.step)).toEqual([5, 50, 100]);
  });
});

describe("ModelRegistry.resolve", () => {
  let reg: ModelRegistry;
  let root: string;
  beforeAll(() => {
    root = fresh();
    const m = writeModel(root, "m");
    writeCheckpoint(m, "step-3", { id: U(3), step: 3 }, ["q4"]);
    writeCheckpoint(m, "step-25", { id: U(25), step: 25 }, ["q4"]);
    writeCheckpoint(m, "step-0", { id: U(100), step: 0 }, ["q4"]);
    writeModel(root, "base", { formats: ["fp32"] });
    const colon = writeModel(root, "llama:8b");
    writeCheckpoint(colon, "s2", { id: U(200), step: 2 }, ["q4"]);
    writeModel(root, "down", { formats: [] });
    reg = ModelRegistry.load(root);
  });

  it("a plain id means the latest checkpoint", () => {
    const r = reg.resolve("m")!;
    expect(r.checkpoint?.step).toBe(25);
    expect(r).toMatchObject({
      dir: join(root, "m", "checkpoints", "step-25"),
      format: "q4",
      servedName: "m",
    });
    expect(r.model.id).toBe("m");
  });

  it("a plain id without checkpoints means the base weights", () => {
    const r = reg.resolve("base")!;
    expect(r.checkpoint).toBeUndefined();
    expect(r).toMatchObject({ dir: join(root, "base"), format: "fp32", servedName: "base" });
  });

  it("<id>:step<N> means that checkpoint", () => {
    for (const step of [0, 3, 25]) {
      const r = reg.resolve(`m:step${step}`)!;
      expect(r.checkpoint?.step).toBe(step);
      expect(r.servedName).toBe(`m:step${step}`);
      expect(r.dir).toBe(join(root, "m", "checkpoints", `step-${step}`));
    }
    expect(reg.resolve("llama:8b:step2")!.checkpoint?.id).toBe(U(200));
    expect(reg.resolve("llama:8b")!.checkpoint?.step).toBe(2);
  });

  it("anything else is unknown", () => {
    for (const name of [
      "nope",
      "nope:step3",
      "m:step4",
      "m:step03",
      "m:step",
      "m:step-3",
      "m:latest",
      "base:step0",
      "down",
      "M",
      "m:step9007199254740993",
      "",
    ])
      expect(reg.resolve(name), name).toBeUndefined();
  });
});

describe("ModelRegistry.refresh", () => {
  it("adds, removes and reports replaced directories and checkpoints, keeping removals", () => {
    const root = fresh();
    const a = writeModel(root, "a");
    writeCheckpoint(a, "s1", { id: U(301), step: 1 }, ["fp32"]);
    const reg = ModelRegistry.load(root);
    expect(reg.list().map((m) => m.id)).toEqual(["a"]);
    expect(reg.refresh()).toEqual({ added: [], removed: [], gone: [] });
    const aRevision = revisionOf(a);

    // A model and a checkpoint appear.
    writeModel(root, "b");
    writeCheckpoint(a, "s2", { id: U(302), step: 2 }, ["fp32"]);
    expect(reg.refresh()).toEqual({ added: ["b"], removed: [], gone: [] });
    expect(reg.get("a")!.checkpoints.map((c) => c.step)).toEqual([1, 2]);
    expect(reg.resolve("a")!.checkpoint?.step).toBe(2);

    // A checkpoint taken out of the registry (the DELETE route) stays out while its directory is unchanged.
    reg.removeCheckpoints("a", [1]);
    expect(reg.refresh()).toEqual({ added: [], removed: [], gone: [] });
    expect(reg.get("a")!.checkpoints.map((c) => c.step)).toEqual([2]);

    // "a" replaced at the same path: its old directory and checkpoint are gone, by their revisions.
    const oldCheckpoint = reg.resolve("a:step2")!;
    renameSync(a, join(root, ".a-old"));
    writeModel(root, "a");
    const change = reg.refresh();
    expect(change.added).toEqual([]);
    expect(change.removed).toEqual([]);
    expect(change.gone).toEqual([
      { dir: a, revision: aRevision },
      { dir: oldCheckpoint.dir, revision: oldCheckpoint.revision },
    ]);
    expect(reg.resolve("a")!.revision).toBe(revisionOf(a));
    expect(reg.resolve("a")!.revision).not.toBe(aRevision);
    expect(reg.resolve("a:step2")).toBeUndefined();

    // Removed.
    rmSync(join(root, "b"), { recursive: true });
    const b = join(root, "b");
    const removed = reg.refresh();
    expect(removed.removed).toEqual(["b"]);
    expect(removed.gone.map((g) => g.dir)).toEqual([b]);
    expect(reg.list().map((m) => m.id)).toEqual(["a"]);
  });
});
