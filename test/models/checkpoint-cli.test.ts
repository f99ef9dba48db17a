import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import {
  afterAll,
  afterEach,
  beforeAll,
  beforeEach,
  describe,
  expect,
  it,
  type MockInstance,
  vi,
} from "vitest";
import { run } from "../../src/cli/commands/checkpoint.ts";
import { listCheckpoints } from "../../src/models/checkpoints.ts";
import { ModelRegistry } from "../../src/models/registry.ts";
import { UsageError } from "../../src/util/usage-error.ts";
import { buildSyntheticModel, writeSyntheticGguf } from "../fixtures/synthetic-model.ts";
import { tempModelsDir, writeCheckpoint } from "./fixtures.ts";

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const MODEL = "synthetic-llama";
let root: string;
let modelDir: string;
let gguf: string;
let stdout: MockInstance<typeof process.stdout.write>;

beforeAll(async () => {
  root = tempModelsDir();
  ({ modelDir } = await buildSyntheticModel(root, ["q4"], MODEL));
  gguf = writeSyntheticGguf(join(root, "trained.gguf"), 2);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeEach(() => {
  stdout = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
  vi.spyOn(process.stderr, "write").mockImplementation(() => true);
});
afterEach(() => vi.restoreAllMocks());

const printed = () => stdout.mock.calls.map((c) => String(c[0])).join("");
const add = (...args: string[]) => run(["add", ...args, "--models-dir", root]);
const checkpointDirs = () => readdirSync(join(modelDir, "checkpoints")).sort();

describe("ortserve checkpoint add", () => {
  it("converts the GGUF into checkpoints/step-<N>/ with fresh metadata", async () => {
    const before = Math.floor(Date.now() / 1000);
    await add(MODEL, gguf, "--step", "25", "--metrics", '{"loss":1.25,"accuracy":0.5}');
    const dir = join(modelDir, "checkpoints", "step-25");
    for (const f of [
      "config.json",
      "tokenizer.json",
      "tokenizer_config.json",
      "onnx/model_q4.onnx",
      "onnx/.converted.json",
    ])
      expect(existsSync(join(dir, f)), f).toBe(true);
    const meta = JSON.parse(readFileSync(join(dir, "checkpoint.json"), "utf8"));
    expect(meta).toEqual({
      id: expect.stringMatching(UUID_V4),
      step: 25,
      metrics: { loss: 1.25, accuracy: 0.5 },
      created: expect.any(Number),
    });
    expect(meta.created).toBeGreaterThanOrEqual(before);
    expect(printed()).toContain(meta.id);
    expect(printed()).toContain(`"${MODEL}:step25"`);

    const reg = ModelRegistry.load(root);
    expect(reg.warnings).toEqual([]);
    const latest = reg.resolve(MODEL)!;
    expect(latest).toMatchObject({ dir, format: "q4", servedName: MODEL });
    expect(latest.checkpoint).toMatchObject({
      id: meta.id,
      step: 25,
      metrics: meta.metrics,
      created: meta.created,
    });
    expect(reg.resolve(`${MODEL}:step25`)!.checkpoint!.id).toBe(meta.id);
    // The converted weights load in ONNX Runtime.
    const session = await ort.InferenceSession.create(join(dir, "onnx", "model_q4.onnx"));
    expect(session.outputNames).toContain("logits");
    await session.release();
  });

  it("converts to the requested format and keeps ids stable across loads", async () => {
    await add(MODEL, gguf, "--step", "3", "--format", "fp32");
    const dir = join(modelDir, "checkpoints", "step-3");
    expect(existsSync(join(dir, "onnx", "model.onnx"))).toBe(true);
    expect(existsSync(join(dir, "onnx", "model_q4.onnx"))).toBe(false);
    const first = ModelRegistry.load(root).get(MODEL)!;
    expect(first.checkpoints.map((c) => [c.step, c.format])).toEqual([
      [3, "fp32"],
      [25, "q4"],
    ]);
    expect(first.checkpoints[0]!.metrics).toEqual({});
    expect(ModelRegistry.load(root).get(MODEL)!.checkpoints).toEqual(first.checkpoints);
    expect(listCheckpoints(first, { order: "desc", limit: "1" }).data[0]!.step).toBe(25);
  });

  it("refuses a step that is already taken, leaving nothing behind", async () => {
    const before = checkpointDirs();
    await expect(add(MODEL, gguf, "--step", "25")).rejects.toThrow(/already has a checkpoint for step 25/);
    // A checkpoint the registry skips still owns its step.
    writeCheckpoint(modelDir, "hand-made", { id: "not-a-uuid", step: 40 });
    await expect(add(MODEL, gguf, "--step", "40")).rejects.toThrow(UsageError);
    expect(checkpointDirs()).toEqual([...before, "hand-made"].sort());
    rmSync(join(modelDir, "checkpoints", "hand-made"), { recursive: true });
  });

  it.each([
    [["--step", "-1"], "--step"],
    [["--step", "1.5"], "--step"],
    [["--step", "x"], "--step"],
    [[], "--step is required"],
    [["--step", "7", "--metrics", "[1]"], "--metrics"],
    [["--step", "7", "--metrics", '{"loss":"low"}'], "--metrics"],
    [["--step", "7", "--metrics", "{loss"], "--metrics"],
    [["--step", "7", "--format", "int3"], "--format"],
  ])("rejects bad options %j", async (args, message) => {
    await expect(add(MODEL, gguf, ...args)).rejects.toThrow(message);
    expect(existsSync(join(modelDir, "checkpoints", "step-7"))).toBe(false);
  });

  it("rejects an unknown model, a missing GGUF and bad arguments", async () => {
    await expect(add("nope", gguf, "--step", "1")).rejects.toThrow(/no model "nope"/);
    await expect(add(MODEL, join(root, "missing.gguf"), "--step", "1")).rejects.toThrow(/not a file/);
    await expect(add(MODEL, "--step", "1")).rejects.toThrow(UsageError);
    await expect(run(["frob", MODEL])).rejects.toThrow(/unknown subcommand/);
    await expect(run([])).rejects.toThrow(UsageError);
    expect(checkpointDirs().filter((d) => d.startsWith("."))).toEqual([]);
  });
});

describe("ortserve checkpoint list", () => {
  it("prints the checkpoints by step", async () => {
    await run(["list", MODEL, "--models-dir", root]);
    const lines = printed().trimEnd().split("\n");
    expect(lines[0]).toMatch(/^STEP\s+ID\s+CREATED\s+FORMAT\s+METRICS$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual(["3", "25"]);
    expect(lines[2]).toContain('{"loss":1.25,"accuracy":0.5}');
  });

  it("prints JSON with --json", async () => {
    await run(["list", MODEL, "--json", "--models-dir", root]);
    const items = JSON.parse(printed());
    expect(items.map((c: { step: number }) => c.step)).toEqual([3, 25]);
    expect(items[1]).toMatchObject({
      id: expect.stringMatching(UUID_V4),
      format: "q4",
      metrics: { loss: 1.25 },
    });
  });

  it("prints help", async () => {
    await run(["--help"]);
    expect(printed()).toMatch(/^Usage: ortserve checkpoint add/);
  });
});
