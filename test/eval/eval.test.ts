/**
 * `ortserve eval` on the synthetic model's checkpoints: dataset parsing, per-item metrics checked
 * against the engine's own greedy output and scores, means written into checkpoint.json (so the
 * listing shows them), the report and chart, and a re-run resuming from the stored results.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { evaluateCheckpoints } from "../../src/cli/commands/eval.ts";
import { Engine } from "../../src/engine/engine.ts";
import { parseDataset } from "../../src/eval/dataset.ts";
import { jsonSchemaValidator } from "../../src/eval/json-valid.ts";
import { addCheckpoint } from "../../src/models/checkpoint-install.ts";
import { ModelRegistry } from "../../src/models/registry.ts";
import { buildSyntheticModel, writeSyntheticGguf } from "../fixtures/synthetic-model.ts";

const quiet = { write: () => true, isTTY: false } as unknown as NodeJS.WriteStream;

let root: string;
let models: string;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "ortserve-eval-"));
  models = join(root, "models");
  mkdirSync(models);
  await buildSyntheticModel(models, ["fp32"], "tiny");
  for (const step of [10, 20]) {
    const gguf = writeSyntheticGguf(join(root, `tiny-${step}.gguf`), step);
    await addCheckpoint({
      modelId: "tiny",
      ggufPath: gguf,
      step,
      modelsDir: models,
      format: "fp32",
      progressStream: quiet,
    });
  }
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe("parseDataset", () => {
  it("reads answer and choice items, choices answered by index or text", () => {
    const items = parseDataset(
      [
        '{"prompt": "2+2=", "answer": "4"}',
        "",
        '{"messages": [{"role": "user", "content": "Hi"}], "choices": ["a", "b"], "answer": "b"}',
        '{"prompt": "x", "choices": ["a", "b", "c"], "answer": 0}',
      ].join("\n"),
    );
    expect(items.map((i) => [i.index, i.kind, i.kind === "json" ? i.schema : i.answer])).toEqual([
      [0, "answer", "4"],
      [1, "choices", 1],
      [2, "choices", 0],
    ]);
  });

  it("names the line of a bad item", () => {
    expect(() => parseDataset('{"prompt": "a", "answer": "b"}\n{"prompt": "a"}')).toThrow(/^line 2: answer/);
    expect(() => parseDataset('{"prompt": "a", "choices": ["x", "y"], "answer": 5}')).toThrow(/line 1/);
    expect(() => parseDataset('{"prompt": "a", "messages": [], "answer": "b"}')).toThrow(/exactly one/);
    expect(() => parseDataset('{"prompt": "a", "answer": "b", "extra": 1}')).toThrow(/unknown field/);
    expect(() => parseDataset("\n")).toThrow(/no items/);
  });

  it("reads schema items: constrained per item, else the caller's default", () => {
    const schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    const text = [
      JSON.stringify({ prompt: "a", schema }),
      JSON.stringify({ prompt: "b", schema, constrained: true }),
      JSON.stringify({ prompt: "c", schema, constrained: false }),
    ].join("\n");
    const flags = (items: ReturnType<typeof parseDataset>) =>
      items.map((i) => (i.kind === "json" ? i.constrained : undefined));
    expect(flags(parseDataset(text))).toEqual([false, true, false]);
    expect(flags(parseDataset(text, { constrained: true }))).toEqual([true, true, false]);
  });

  it("names the line of a bad schema item", () => {
    expect(() => parseDataset('{"prompt": "a", "schema": {"type": "nonsense"}}')).toThrow(/^line 1: schema:/);
    expect(() => parseDataset('{"prompt": "a", "schema": {}, "answer": "x"}')).toThrow(
      /no answer or choices/,
    );
    expect(() => parseDataset('{"prompt": "a", "constrained": true}')).toThrow(/needs a schema/);
    expect(() => parseDataset('{"prompt": "a", "schema": {}, "constrained": 1}')).toThrow(/true or false/);
    // A keyword the structured-output backend cannot enforce is refused only when enforced.
    const unsupported = JSON.stringify({ prompt: "a", schema: { type: "integer", multipleOf: 3 } });
    expect(parseDataset(unsupported)).toHaveLength(1);
    expect(() => parseDataset(unsupported, { constrained: true })).toThrow(
      /^line 1: schema cannot be enforced/,
    );
  });
});

describe("jsonSchemaValidator", () => {
  const validate = jsonSchemaValidator({
    type: "object",
    properties: { name: { type: "string" }, when: { type: "string", format: "date" } },
    required: ["name"],
    additionalProperties: false,
  });

  it("accepts JSON that satisfies the schema, whitespace around it included", () => {
    expect(validate('{"name": "Ann"}')).toBe(true);
    expect(validate('\n  {"name":"Ann","when":"2024-02-29"}\n')).toBe(true);
  });

  it("rejects what does not parse or does not validate, formats included", () => {
    expect(validate('{"name": "Ann"')).toBe(false);
    expect(validate('```json\n{"name": "Ann"}\n```')).toBe(false);
    expect(validate('{"name": "Ann"} and more')).toBe(false);
    expect(validate("")).toBe(false);
    expect(validate('{"name": 3}')).toBe(false);
    expect(validate("{}")).toBe(false);
    expect(validate('{"name": "Ann", "age": 3}')).toBe(false);
    expect(validate('{"name": "Ann", "when": "2023-02-29"}')).toBe(false);
  });

  it("compiles schemas sharing an $id independently", () => {
    const a = jsonSchemaValidator({ $id: "https://example.com/s", type: "integer" });
    const b = jsonSchemaValidator({ $id: "https://example.com/s", type: "string" });
    expect([a("1"), a('"x"'), b("1"), b('"x"')]).toEqual([true, false, false, true]);
  });
});

describe("evaluateCheckpoints", () => {
  it("scores every checkpoint, writes the means into checkpoint.json and the report, and resumes", async () => {
    const engine = await Engine.open({ modelsDir: models, workers: 1, threads: 1 });
    let expected: string;
    let bestChoice: number;
    try {
      const out = await engine.generate({
        model: "tiny:step10",
        prompt: { text: "the cat" },
        params: { maxTokens: 6, sampling: { temperature: 0 } },
      });
      expected = out.choices[0]!.text;
      // The choice step 10 scores highest after "the", computed here from the engine's scores.
      const choices = ["he", "at", "in"];
      const totals = [];
      for (const c of choices) {
        const s = await engine.score({ model: "tiny:step10", prompt: { text: `the ${c}` } });
        const context = (await engine.score({ model: "tiny:step10", prompt: { text: "the" } })).promptTokenIds
          .length;
        totals.push(s.promptLogprobs.slice(context).reduce((a, p) => a + p!.entries[0]!.logprob, 0));
      }
      bestChoice = totals.indexOf(Math.max(...totals));
    } finally {
      await engine.close();
    }
    expect(expected.trim().length).toBeGreaterThan(0);
    const items = parseDataset(
      [
        JSON.stringify({ prompt: "the cat", answer: expected }),
        JSON.stringify({ prompt: "the cat", answer: `${expected} and more` }),
        JSON.stringify({ prompt: "the", choices: ["he", "at", "in"], answer: bestChoice }),
      ].join("\n"),
    );
    const out = join(root, "report");
    const options = {
      modelId: "tiny",
      items,
      datasetName: "tiny-set",
      datasetHash: "abc123",
      checkpoints: "all",
      maxTokens: 6,
      concurrency: 3,
      outDir: out,
      modelsDir: models,
      progressStream: quiet,
    };
    const first = await evaluateCheckpoints(options);
    expect(first.table).toContain("| 10 | tiny:step10 | 3 |");
    const results = readFileSync(join(out, "tiny-set-abc123.jsonl"), "utf8").trim().split("\n");
    expect(results).toHaveLength(6);
    const step10 = ModelRegistry.load(models)
      .get("tiny")!
      .checkpoints.find((c) => c.step === 10)!;
    expect(step10.metrics).toEqual({
      "tiny-set/exact_match": 0.5,
      "tiny-set/contains": 0.5,
      "tiny-set/mc_accuracy": 1,
    });
    const step20 = ModelRegistry.load(models)
      .get("tiny")!
      .checkpoints.find((c) => c.step === 20)!;
    expect(Object.keys(step20.metrics).sort()).toEqual([
      "tiny-set/contains",
      "tiny-set/exact_match",
      "tiny-set/mc_accuracy",
    ]);
    expect(readFileSync(join(out, "report.md"), "utf8")).toContain(first.table);
    const svg = readFileSync(join(out, "metrics.svg"), "utf8");
    expect(svg).toMatch(/^<svg/);
    expect(svg).toContain("mc_accuracy");

    // A second run finds every result stored: nothing is evaluated again, the report is the same.
    const again = await evaluateCheckpoints({ ...options, checkpoints: "10,20" });
    expect(again.table).toBe(first.table);
    expect(readFileSync(join(out, "tiny-set-abc123.jsonl"), "utf8").trim().split("\n")).toHaveLength(6);
  });

  it("refuses a step the model lacks", async () => {
    await expect(
      evaluateCheckpoints({
        modelId: "tiny",
        items: parseDataset('{"prompt": "a", "answer": "b"}'),
        datasetName: "x",
        datasetHash: "0",
        checkpoints: "30",
        maxTokens: 1,
        concurrency: 1,
        outDir: join(root, "unused"),
        modelsDir: models,
        progressStream: quiet,
      }),
    ).rejects.toThrow(/no checkpoint for step "30"/);
  });
});
