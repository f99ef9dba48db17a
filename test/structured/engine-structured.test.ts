/**
 * Structured outputs through the in-process Engine (the piscina worker thread, the real model):
 * outputs sampled at temperature 1 with random seeds always satisfy their constraint — generated
 * JSON Schemas validated by Ajv (with formats), choices, regexes and a grammar — with n > 1,
 * logprobs, seeds, stop strings and max_tokens inside a structure.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GenerateParams } from "../../src/core/request-defaults.ts";
import type { StructuredConstraint } from "../../src/core/structured/constraint-spec.ts";
import { Engine, type GeneratedChoice } from "../../src/engine/engine.ts";
import { prng } from "../gguf/helpers.ts";
import { hasModel, MODEL_ID } from "../runner/model-fixture.ts";
import { SLOW } from "./grammar-driver.ts";

function randomSchema(r: () => number, depth = 0): Record<string, unknown> {
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
  const kind = pick(
    depth < 1 ? ["int", "str", "enum", "bool", "arr", "obj", "date", "any"] : ["int", "str", "enum", "bool"],
  );
  switch (kind) {
    case "int":
      return r() < 0.5 ? { type: "integer", minimum: Math.floor(r() * 2) } : { type: "integer" };
    case "str":
      return r() < 0.5
        ? { type: "string", maxLength: 1 + Math.floor(r() * 10) }
        : { type: "string", pattern: "^[a-z]{1,6}[0-9]?$" };
    case "enum":
      return { enum: ["red", "green", 3, null].slice(0, 2 + Math.floor(r() * 3)) };
    case "bool":
      return { type: "boolean" };
    case "arr":
      return { type: "array", items: randomSchema(r, depth + 1), maxItems: 3 };
    case "date":
      return { type: "string", format: pick(["date", "date-time", "uuid", "ipv4", "email"]) };
    case "any":
      return {
        anyOf: [
          { type: "integer", minimum: 0 },
          { type: "string", maxLength: 4 },
        ],
      };
    default: {
      const n = 1 + Math.floor(r() * 3);
      const properties: Record<string, unknown> = {};
      for (let i = 0; i < n; i++) properties[`k${i}`] = randomSchema(r, depth + 1);
      return {
        type: "object",
        properties,
        required: Object.keys(properties).filter(() => r() < 0.7),
        additionalProperties: false,
      };
    }
  }
}

describe.skipIf(!hasModel("q4"))("structured outputs through the Engine", () => {
  let engine: Engine;
  const ajv = new Ajv2020({ strict: false });
  // ajv-formats is CommonJS: its plugin is the module's `default` export.
  addFormats.default(ajv);
  beforeAll(async () => {
    // A compile budget short enough for the refusal test below (counted patterns, compile-budget.test.ts).
    engine = await Engine.open({ workers: 1, threads: 2, grammarCompileTimeoutMs: 1000 });
  });
  afterAll(async () => {
    await engine?.close();
  });

  const run = (content: string, constraint: StructuredConstraint, params: GenerateParams = {}) =>
    engine.generate({
      model: MODEL_ID,
      prompt: { messages: [{ role: "user", content }] },
      params: {
        maxTokens: 96,
        n: 2,
        constraint,
        ...params,
        sampling: { temperature: 1, seed: BigInt(Math.floor(Math.random() * 2 ** 31)), ...params.sampling },
      },
    });

  const finished = (choices: GeneratedChoice[]) => choices.filter((c) => c.finishReason === "stop");

  it("generated JSON Schemas: every finished output parses and validates (Ajv, with formats)", async () => {
    let validated = 0;
    for (let seed = 1; seed <= 8; seed++) {
      // Closed objects: left open, SmolLM2 writes extra keys until max_tokens and no output finishes.
      const schema = {
        type: "object",
        properties: { value: randomSchema(prng(seed)) },
        required: ["value"],
        additionalProperties: false,
      };
      const validate = ajv.compile(schema);
      const out = await run(`Reply with JSON for: ${JSON.stringify(schema)}`, {
        kind: "json_schema",
        schema: JSON.stringify(schema),
        anyWhitespace: false,
      });
      for (const c of finished(out.choices)) {
        const value = JSON.parse(c.text);
        expect(validate(value), `seed ${seed}: ${c.text} ${JSON.stringify(validate.errors)}`).toBe(true);
        validated++;
      }
    }
    expect(validated).toBeGreaterThan(0);
  });

  it("choice: always exactly one of the choices", async () => {
    const choices = ["Paris", "Lyon", 'say "Nice"'];
    for (let i = 0; i < 3; i++) {
      const out = await run("Which city?", { kind: "choice", choices }, { n: 3 });
      for (const c of out.choices) {
        expect(choices).toContain(c.text);
        expect(c.finishReason).toBe("stop");
      }
    }
  });

  it("regex and grammar: every output matches", async () => {
    const cases: [StructuredConstraint, RegExp][] = [
      [{ kind: "regex", pattern: "[A-Z][a-z]{2,8} [0-9]{1,3}" }, /^[A-Z][a-z]{2,8} [0-9]{1,3}$/],
      [{ kind: "regex", pattern: "(yes|no), because .{1,20}" }, /^(yes|no), because [^\n\r]{1,20}$/u],
      [
        { kind: "grammar", grammar: 'root ::= item ("," item){0,3}\nitem ::= [a-z]+ "=" [0-9]+' },
        /^[a-z]+=[0-9]+(,[a-z]+=[0-9]+){0,3}$/,
      ],
    ];
    for (const [constraint, re] of cases) {
      const out = await run("Answer briefly.", constraint, { maxTokens: 48 });
      for (const c of finished(out.choices)) expect(c.text).toMatch(re);
    }
  });

  it("logprobs stay the masked row's (as vLLM), a seed repeats, and max_tokens inside a structure is length", async () => {
    const constraint: StructuredConstraint = { kind: "choice", choices: ["alpha", "beta"] };
    const a = await run("Pick one.", constraint, { n: 1, logprobs: 3, sampling: { seed: 7n } });
    const b = await run("Pick one.", constraint, { n: 1, logprobs: 3, sampling: { seed: 7n } });
    expect(a.choices[0]!.text).toBe(b.choices[0]!.text);
    for (const lp of a.choices[0]!.logprobs!) {
      expect(Number.isFinite(lp.logprob)).toBe(true);
      // Masked-out tokens carry -inf in the returned alternatives; the allowed ones are finite.
      expect(lp.top[0]!.logprob).toBeGreaterThan(Number.NEGATIVE_INFINITY);
    }
    const long = await run(
      "Write JSON.",
      {
        kind: "json_schema",
        schema: '{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}',
        anyWhitespace: true,
      },
      { maxTokens: 3 },
    );
    for (const c of long.choices) expect(c.finishReason).toBe("length");
  });

  it("jump-forward: forced text joins without a step per token, outputs still validate; none with logprobs", async () => {
    const jumped = async () =>
      Object.values(await engine.stats()).reduce<number>(
        (sum, e) => sum + ((e as { jumpForwardTokens?: number }).jumpForwardTokens ?? 0),
        0,
      );
    const schema = {
      type: "object",
      properties: {
        name_of_the_city: { type: "string", maxLength: 12 },
        population: { type: "integer" },
        capital: { type: "boolean" },
      },
      required: ["name_of_the_city", "population", "capital"],
      additionalProperties: false,
    };
    const validate = ajv.compile(schema);
    const constraint: StructuredConstraint = {
      kind: "json_schema",
      schema: JSON.stringify(schema),
      anyWhitespace: false,
    };
    const before = await jumped();
    // The first key's forced text is more than four tokens (`{"`, `name`, `_`, `of`, ...): a jump.
    const out = await run("Describe a city as JSON.", constraint, { maxTokens: 64, n: 1 });
    for (const c of out.choices) {
      // Forced and sampled tokens alike are in the output, counted once each.
      expect(c.tokenIds.length).toBeLessThanOrEqual(64);
      if (c.finishReason === "stop") expect(validate(JSON.parse(c.text)), c.text).toBe(true);
    }
    const after = await jumped();
    expect(after).toBeGreaterThan(before);
    // Forced tokens are not sampled, so a request for logprobs samples every token.
    const lp = await run("Describe a city as JSON.", constraint, { maxTokens: 64, n: 1, logprobs: 1 });
    expect(await jumped()).toBe(after);
    expect(lp.choices[0]!.logprobs).toHaveLength(lp.choices[0]!.tokenIds.length);

    // With ONNX Runtime's attention (no ragged passes) the forced tokens take a pass of their own.
    process.env.ORTSERVE_CACHED_ATTENTION = "0";
    const plain = await Engine.open({ workers: 1, threads: 2 }).finally(() => {
      delete process.env.ORTSERVE_CACHED_ATTENTION;
    });
    try {
      const out = await plain.generate({
        model: MODEL_ID,
        prompt: { messages: [{ role: "user", content: "Describe a city as JSON." }] },
        params: { maxTokens: 64, constraint },
      });
      const jumpedThere = Object.values(await plain.stats()).reduce<number>(
        (sum, e) => sum + ((e as { jumpForwardTokens?: number }).jumpForwardTokens ?? 0),
        0,
      );
      expect(jumpedThere).toBeGreaterThan(0);
      const c = out.choices[0]!;
      if (c.finishReason === "stop") expect(validate(JSON.parse(c.text)), c.text).toBe(true);
    } finally {
      await plain.close();
    }
  });

  it("stop strings still end a constrained output", async () => {
    const out = await run("Count.", { kind: "regex", pattern: "1,2,3,4,5" }, { n: 1, stop: [",3"] });
    expect(out.choices[0]!.text).toBe("1,2");
    expect(out.choices[0]!.stopReason).toBe(",3");
  });

  it("refusals are 400s naming the feature", async () => {
    await expect(
      run("x", { kind: "json_schema", schema: '{"type":"integer","multipleOf":3}', anyWhitespace: true }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("multipleOf") });
    await expect(run("x", { kind: "grammar", grammar: "root ::= nope" })).rejects.toMatchObject({
      status: 400,
      message: expect.stringContaining("nope"),
    });
    await expect(run("x", SLOW)).rejects.toMatchObject({
      status: 400,
      param: "structured_outputs.json",
      message: expect.stringContaining("grammar compile budget"),
    });
  });

  it("beam search: every beam grows inside the language, forks and all", async () => {
    const beam = { useBeamSearch: true, sampling: { temperature: 0 } };
    const cities = ["Paris", "Lyon", "Marseille", "Nice"];
    const choice = await run("Which city?", { kind: "choice", choices: cities }, { ...beam, n: 3 });
    expect(choice.choices).toHaveLength(3);
    for (const c of choice.choices) expect(cities).toContain(c.text);
    const regex = await run(
      "Give a product code.",
      { kind: "regex", pattern: "[A-Z]{2}-[0-9]{3,5}" },
      { ...beam, n: 4, maxTokens: 24 },
    );
    for (const c of regex.choices)
      if (c.finishReason === "stop") expect(c.text).toMatch(/^[A-Z]{2}-[0-9]{3,5}$/);
    expect(regex.choices.some((c) => c.finishReason === "stop")).toBe(true);
    const schema = {
      type: "object",
      properties: { n: { type: "integer" }, ok: { type: "boolean" } },
      required: ["n", "ok"],
    };
    const validate = ajv.compile(schema);
    const json = await run(
      "Reply with JSON.",
      { kind: "json_schema", schema: JSON.stringify(schema), anyWhitespace: false },
      { ...beam, n: 2, maxTokens: 40 },
    );
    for (const c of finished(json.choices)) expect(validate(JSON.parse(c.text)), c.text).toBe(true);
  });
});
