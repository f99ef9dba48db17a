/**
 * Structured outputs on a reasoning model: the think block is free text up to `</think>`, and the
 * answer after it is bound exactly as without reasoning — driven token by token over SmolLM2's
 * real vocabulary. Whatever the think block holds, no answer outside the language gets through.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { StructuredConstraint } from "../../src/core/structured/constraint-spec.ts";
import { toolCallConstraint } from "../../src/protocol/tool-calls/tool-choice.ts";
import { hasModel } from "../runner/model-fixture.ts";
import { type GrammarDriver, grammarDriver } from "./grammar-driver.ts";

const SCHEMA = JSON.stringify({
  type: "object",
  properties: { n: { type: "integer", minimum: 1, maximum: 9 }, tag: { enum: ["a", "b"] } },
  required: ["n", "tag"],
});

const DIGIT_NAMES = JSON.stringify({
  type: "object",
  properties: Object.fromEntries([0, 1, 2, 3, 4, 5, 6].map((d) => [`x${d}`, { type: "integer" }])),
});

const WEATHER = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: undefined,
    strict: undefined,
    parameters: { type: "object", properties: { city: { enum: ["Paris", "Rome"] } }, required: ["city"] },
  },
};
const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
// The legacy structural tag: structures dispatched by their triggers, free text between them.
const LEGACY = JSON.stringify({
  type: "structural_tag",
  structures: [
    {
      begin: "<w>",
      schema: { type: "object", properties: { n: { const: 1 } }, required: ["n"] },
      end: "</w>",
    },
  ],
  triggers: ["<w>"],
});

const kinds: [string, StructuredConstraint][] = [
  ["a JSON schema with a numeric range", { kind: "json_schema", schema: SCHEMA, anyWhitespace: false }],
  ["a regex", { kind: "regex", pattern: "[0-9]{3}-ok" }],
  ["a choice", { kind: "choice", choices: ["yes", "no"] }],
  ["a grammar", { kind: "grammar", grammar: 'root ::= "x" [0-9]+' }],
  // An open object whose extra names leave out digits: XGrammar prints that class as "\x1f0123…",
  // which its parser reads back as one hex escape (the spliced grammar must reach the tag as written).
  ["an open object", { kind: "json_schema", schema: DIGIT_NAMES, anyWhitespace: false }],
  // A forced tool call keeps its tags: bare arguments are no call.
  ["a required tool call", toolCallConstraint("required", [WEATHER], true)!],
];
const valid: Record<string, string> = {
  "a JSON schema with a numeric range": '{"n":5,"tag":"a"}',
  "a regex": "123-ok",
  "a choice": "no",
  "a grammar": "x42",
  "an open object": '{"x3":1,"xz":"free"}',
  "a required tool call": CALL,
};
const invalid: Record<string, string[]> = {
  "a JSON schema with a numeric range": ['{"n":10,"tag":"a"}', '{"n":5,"tag":"c"}', "Sure! {}", '{"n":5}'],
  "a regex": ["12-ok", "1234-ok", " 123-ok"],
  "a choice": ["maybe", "yes!"],
  "a grammar": ["y42", "x"],
  "an open object": ['{"x3":"1"}', '{"x6":true}', '{"x0":1'],
  "a required tool call": ['{"city": "Paris"}', CALL.replace("Paris", "Oslo"), `Sure. ${CALL}`],
};
// Reasoning that looks like an answer, with tags and JSON inside, must not end the block early.
const THOUGHTS = ["", 'Let me think. {"n": 99} <think> is not </thin k> yet.\n', "短い考え\n\n"];

describe.skipIf(!hasModel("q4"))("a constraint behind a think block", () => {
  let drive: GrammarDriver["drive"];
  beforeAll(async () => {
    ({ drive } = await grammarDriver());
  });

  for (const [name, inner] of kinds) {
    const opened: StructuredConstraint = { ...inner, afterThinking: { opened: true } };
    const closed: StructuredConstraint = { ...inner, afterThinking: { opened: false } };

    it(`${name}: free reasoning, then only the language`, async () => {
      for (const thought of THOUGHTS) {
        expect(await drive(opened, `${thought}</think>${valid[name]}`)).toBe("accepted");
        for (const bad of invalid[name]!)
          expect(await drive(opened, `${thought}</think>${bad}`)).not.toBe("accepted");
        // No answer at all is no way out either.
        expect(await drive(opened, `${thought}</think>`)).not.toBe("accepted");
        expect(await drive(opened, thought)).not.toBe("accepted");
      }
    });

    it(`${name}: a prompt that did not open the block lets the output open it, or answer at once`, async () => {
      expect(await drive(closed, `<think>${THOUGHTS[1]}</think>${valid[name]}`)).toBe("accepted");
      expect(await drive(closed, valid[name]!)).toBe("accepted");
      for (const bad of invalid[name]!) {
        expect(await drive(closed, bad)).not.toBe("accepted");
        expect(await drive(closed, `<think>x</think>${bad}`)).not.toBe("accepted");
      }
      // Text before the answer is not reasoning unless it opened the block.
      expect(await drive(closed, `Thinking.</think>${valid[name]}`)).not.toBe("accepted");
    });
  }

  it("a legacy structural tag: free text after the block, and each triggered structure bound", async () => {
    const legacy: StructuredConstraint = {
      kind: "structural_tag",
      structuralTag: LEGACY,
      afterThinking: { opened: true },
    };
    expect(await drive(legacy, `${THOUGHTS[1]}</think>see <w>{"n": 1}</w> done`)).toBe("accepted");
    expect(await drive(legacy, `${THOUGHTS[1]}</think>see <w>{"n": 2}</w>`)).not.toBe("accepted");
    expect(await drive(legacy, "x</think><w>{}</w>")).not.toBe("accepted");
  });
});
