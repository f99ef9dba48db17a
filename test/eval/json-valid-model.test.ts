/**
 * json_valid on the real model through the in-process Engine: a constrained item's greedy output
 * finishes and validates, one cut by max_tokens counts as invalid, and an unconstrained item's
 * score matches its greedy output checked here by hand.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadTransformersTokenizer } from "../../src/core/runner/tokenizer.ts";
import { Engine } from "../../src/engine/engine.ts";
import { parseDataset } from "../../src/eval/dataset.ts";
import { evaluateItem } from "../../src/eval/evaluate.ts";
import type { Encode } from "../../src/eval/loglikelihood.ts";
import { hasModel, MODEL_DIR, MODEL_ID } from "../runner/model-fixture.ts";

const SCHEMA = {
  type: "object",
  properties: { name: { type: "string", maxLength: 16 }, age: { type: "integer", minimum: 0 } },
  required: ["name", "age"],
  additionalProperties: false,
};
const MESSAGES = [{ role: "user", content: "Describe a person as JSON with a name and an age." }];

/** The schema's meaning, checked without the validator under test. */
function matchesSchema(text: string): boolean {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return false;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const o = v as Record<string, unknown>;
  return (
    Object.keys(o).every((k) => k === "name" || k === "age") &&
    typeof o.name === "string" &&
    o.name.length <= 16 &&
    Number.isInteger(o.age) &&
    (o.age as number) >= 0
  );
}

describe.skipIf(!hasModel("q4"))("json_valid with the real model", () => {
  let engine: Engine;
  let encode: Encode;
  beforeAll(async () => {
    engine = await Engine.open({ workers: 1, threads: 1 });
    const tok = await loadTransformersTokenizer(MODEL_DIR);
    encode = (text, special) => tok.encode(text, { add_special_tokens: special });
  });
  afterAll(async () => {
    await engine?.close();
  });

  const items = parseDataset(
    [
      { messages: MESSAGES, schema: SCHEMA, constrained: true },
      { messages: MESSAGES, schema: SCHEMA },
    ]
      .map((x) => JSON.stringify(x))
      .join("\n"),
  );

  it("a constrained item's output finishes and validates", async () => {
    const r = await evaluateItem(engine, MODEL_ID, encode, items[0]!, { maxTokens: 48 });
    expect(r.finish_reason).toBe("stop");
    expect(matchesSchema(r.output!)).toBe(true);
    expect(r.json_valid).toBe(1);
  });

  it("a constrained output cut by max_tokens is invalid", async () => {
    const r = await evaluateItem(engine, MODEL_ID, encode, items[0]!, { maxTokens: 4 });
    expect(r.finish_reason).toBe("length");
    expect(r.json_valid).toBe(0);
  });

  it("an unconstrained item is scored on its greedy output as generated", async () => {
    const r = await evaluateItem(engine, MODEL_ID, encode, items[1]!, { maxTokens: 48 });
    const greedy = await engine.generate({
      model: MODEL_ID,
      prompt: { messages: MESSAGES },
      params: { maxTokens: 48, sampling: { temperature: 0 } },
    });
    expect(r.output).toBe(greedy.choices[0]!.text);
    expect(r.json_valid).toBe(matchesSchema(greedy.choices[0]!.text) ? 1 : 0);
  });
});
