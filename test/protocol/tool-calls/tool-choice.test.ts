/**
 * tool_choice → constraint: "required" and a named function become a structural tag that only
 * lets the model write valid Hermes calls of the tools (driven token by token on SmolLM2's real
 * vocabulary), and what the forced output is, the Hermes parser reads back as calls.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { checkSupported } from "../../../src/core/structured/check-constraint.ts";
import { jsonWhitespace, type StructuredConstraint } from "../../../src/core/structured/constraint-spec.ts";
import type { Tool } from "../../../src/protocol/request-fields.ts";
import { HermesToolCallParser } from "../../../src/protocol/tool-calls/hermes.ts";
import { parseToolCalls } from "../../../src/protocol/tool-calls/parsers.ts";
import { toolCallConstraint } from "../../../src/protocol/tool-calls/tool-choice.ts";
import { hasModel } from "../../runner/model-fixture.ts";
import { type GrammarDriver, grammarDriver } from "../../structured/grammar-driver.ts";
import { expect400, parse } from "../helpers.ts";

const tool = (name: string, parameters?: Record<string, unknown>): Tool => ({
  type: "function",
  function: { name, parameters, description: undefined, strict: undefined },
});
const weather = tool("get_weather", {
  type: "object",
  properties: { city: { type: "string" }, days: { type: "integer" } },
  required: ["city", "days"],
  additionalProperties: false,
});
const ping = tool("ping");
const tools = [weather, ping];
/** As a request body holds them (no undefined fields). */
const wire = (t: Tool[]) => JSON.parse(JSON.stringify(t));

describe("tool_choice parsing", () => {
  it("none and auto carry no constraint; required and a named function do", () => {
    expect(parse({ tools: wire(tools), tool_choice: "none" }).constraint).toBeUndefined();
    expect(parse({ tools: wire(tools), tool_choice: "auto" }).constraint).toBeUndefined();
    const required = parse({ tools: wire(tools), tool_choice: "required" });
    expect(required.constraint?.kind).toBe("structural_tag");
    expect(required.constraint_field).toBe("tool_choice");
    const named = parse({
      tools: wire(tools),
      tool_choice: { type: "function", function: { name: "ping" } },
    });
    expect(named.constraint?.kind).toBe("structural_tag");
    expect(() => checkSupported(jsonWhitespace(named.constraint!, false))).not.toThrow();
  });

  it("a forced call and another constraint are two constraints: 400", () => {
    expect400(
      () => parse({ tools: wire(tools), tool_choice: "required", response_format: { type: "json_object" } }),
      "tool_choice",
    );
  });

  it("a parameter keyword the backend cannot enforce is a 400 naming the tool and the keyword", () => {
    const bad = tool("f", {
      type: "object",
      properties: { a: { type: "string" } },
      propertyNames: { pattern: "^a" },
    });
    const e = expect400(
      () => parse({ tools: wire([ping, bad]), tool_choice: "required" }),
      "tools[1].function.parameters",
    );
    expect(e.message).toMatch(/"f".*propertyNames/);
    const any = tool("g", {});
    expect400(() => parse({ tools: wire([any]), tool_choice: "required" }), "tools[0].function.parameters");
    // Under auto nothing is constrained, so nothing needs enforcing.
    expect(parse({ tools: wire([ping, bad]), tool_choice: "auto" }).constraint).toBeUndefined();
  });
});

describe.skipIf(!hasModel("q4"))("the forced call's grammar on SmolLM2's vocabulary", () => {
  let driver: GrammarDriver;
  beforeAll(async () => {
    driver = await grammarDriver();
  });
  /** True when the grammar takes every token of the text and may end there. */
  const accepts = async (c: StructuredConstraint, text: string) =>
    (await driver.drive(c, text)) === "accepted";

  const call = (name: string, args: string) =>
    `<tool_call>\n{"name": "${name}", "arguments": ${args}}\n</tool_call>`;
  const names = new Set(tools.map((t) => t.function.name));

  it("named: one call of that tool whose arguments follow its schema", async () => {
    const c = toolCallConstraint({ type: "function", function: { name: "get_weather" } }, tools, true)!;
    const good = call("get_weather", '{"city": "Paris", "days": 3}');
    expect(await accepts(c, good)).toBe(true);
    const parsed = parseToolCalls(new HermesToolCallParser({ toolNames: names, parallel: true }), good);
    expect(parsed.calls.map((x) => x.function)).toEqual([
      { name: "get_weather", arguments: '{"city": "Paris", "days": 3}' },
    ]);
    for (const bad of [
      call("get_weather", '{"city": "Paris"}'),
      call("get_weather", '{"city": "Paris", "days": "3"}'),
      call("ping", "{}"),
      `${good}\n${good}`,
      "Sure!",
    ])
      expect(await accepts(c, bad), bad).toBe(false);
  });

  it("required: any tool; several calls only with parallel_tool_calls", async () => {
    const two = `${call("ping", "{}")}\n${call("get_weather", '{"city": "Oslo", "days": 1}')}`;
    const parallel = toolCallConstraint("required", tools, true)!;
    expect(await accepts(parallel, call("ping", "{}"))).toBe(true);
    expect(await accepts(parallel, two)).toBe(true);
    expect(await accepts(parallel, call("pong", "{}"))).toBe(false);
    expect(await accepts(parallel, call("ping", '{"x": 1}'))).toBe(false);
    expect(await accepts(parallel, "")).toBe(false);
    const single = toolCallConstraint("required", tools, false)!;
    expect(await accepts(single, call("ping", "{}"))).toBe(true);
    expect(await accepts(single, two)).toBe(false);
  });
});
