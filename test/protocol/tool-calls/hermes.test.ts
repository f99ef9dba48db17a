/**
 * The Hermes parser: full text and the same text streamed in every split give the same content
 * and calls; malformed blocks stay content as written.
 */
import { describe, expect, it } from "vitest";
import { HermesToolCallParser } from "../../../src/protocol/tool-calls/hermes.ts";
import { parseToolCalls, toolCallDeltas } from "../../../src/protocol/tool-calls/parsers.ts";
import type { ParsedToolCall } from "../../../src/protocol/tool-calls/types.ts";

const names = new Set(["get_weather", "get_time"]);
const parser = (parallel = true, streamArguments = false) =>
  new HermesToolCallParser({ toolNames: names, parallel, streamArguments });
const full = (text: string, parallel = true) => {
  const { content, calls } = parseToolCalls(parser(parallel), text);
  return { content, calls: calls.map((c) => c.function) };
};

/** Feeds the pieces one by one: the content joined and the calls, as a stream client sees them. */
function streamed(
  pieces: string[],
  parallel = true,
  streamArguments = false,
): { content: string; calls: ParsedToolCall[] } {
  const p = parser(parallel, streamArguments);
  let content = "";
  const calls: ParsedToolCall[] = [];
  for (const out of [...pieces.flatMap((x) => p.push(x)), ...p.finish()]) {
    if (out.kind === "call") calls.push({ ...out.call });
    else if (out.kind === "start") calls.push({ name: out.name, arguments: "" });
    else if (out.kind === "arguments") calls.at(-1)!.arguments += out.arguments;
    else content += out.content;
  }
  return { content, calls };
}

const weather =
  '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>';
const time = '<tool_call>{"name": "get_time", "parameters": {"timezone": "UTC"}}</tool_call>';
// The model's own argument text is kept; a body of another shape ("parameters") is re-serialized.
const weatherCall = { name: "get_weather", arguments: '{"city": "Paris", "days": 3}' };
const timeCall = { name: "get_time", arguments: '{"timezone":"UTC"}' };

const CASES: { text: string; content: string | null; calls: ParsedToolCall[]; parallel?: boolean }[] = [
  { text: weather, content: null, calls: [weatherCall] },
  { text: `Let me check.\n${weather}`, content: "Let me check.", calls: [weatherCall] },
  { text: `${weather}\n${time}\n`, content: null, calls: [weatherCall, timeCall] },
  { text: `${weather}\n${time}`, content: null, calls: [weatherCall], parallel: false },
  { text: "No tools needed.  ", content: "No tools needed.  ", calls: [] },
  { text: "", content: "", calls: [] },
  { text: "a < b and <tool_ is not a tag", content: "a < b and <tool_ is not a tag", calls: [] },
  // Malformed: unclosed, bad JSON, unknown name, arguments not an object, name missing.
  {
    text: '<tool_call>{"name": "get_time", "arguments": {',
    content: '<tool_call>{"name": "get_time", "arguments": {',
    calls: [],
  },
  {
    text: "<tool_call>{name: get_time}</tool_call>",
    content: "<tool_call>{name: get_time}</tool_call>",
    calls: [],
  },
  {
    text: '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',
    content: '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',
    calls: [],
  },
  {
    text: '<tool_call>{"name": "get_time", "arguments": "UTC"}</tool_call>',
    content: '<tool_call>{"name": "get_time", "arguments": "UTC"}</tool_call>',
    calls: [],
  },
  { text: "<tool_call>[1, 2]</tool_call>", content: "<tool_call>[1, 2]</tool_call>", calls: [] },
  // A malformed block next to a good one: the good one is a call, the other stays content.
  {
    text: `${weather} then <tool_call>oops</tool_call>`,
    content: " then <tool_call>oops</tool_call>",
    calls: [weatherCall],
  },
  { text: `Sure: ${time} done`, content: "Sure:  done", calls: [timeCall] },
];

describe("Hermes tool-call parser", () => {
  it.each(CASES)("full text: $text", ({ text, content, calls, parallel }) => {
    expect(full(text, parallel)).toEqual({ content, calls });
  });

  it.each(CASES)("streamed in every two-piece split and char by char: $text", ({ text, parallel }) => {
    const expected = full(text, parallel);
    const asStream = (r: { content: string; calls: ParsedToolCall[] }) => ({
      content: r.calls.length > 0 && r.content === "" ? null : r.content,
      calls: r.calls,
    });
    for (let i = 0; i <= text.length; i++)
      expect(asStream(streamed([text.slice(0, i), text.slice(i)], parallel))).toEqual(expected);
    expect(asStream(streamed([...text], parallel))).toEqual(expected);
  });

  it("gives content out before the text ends, holding back only what may start a tag", () => {
    const p = parser();
    expect(p.push("Hello <tool")).toEqual([{ kind: "content", content: "Hello" }]);
    expect(p.push("tip> ")).toEqual([{ kind: "content", content: " <tooltip>" }]);
    expect(p.push(weather.slice(0, 30))).toEqual([]);
    expect(p.push(weather.slice(30))).toEqual([{ kind: "call", call: weatherCall }]);
    expect(p.callCount).toBe(1);
  });

  const FORCED = [weather, `${weather}\n${weather}`, call('{"a": {"b": [1, "}"]}, "c": "x } y"}')];
  function call(args: string) {
    return `<tool_call>\n{"name": "get_time", "arguments": ${args}}\n</tool_call>`;
  }

  it.each(FORCED)(
    "streamed arguments (forced calls) agree with the full parse in every split: %s",
    (text) => {
      const expected = full(text);
      for (let i = 0; i <= text.length; i++)
        expect(streamed([text.slice(0, i), text.slice(i)], true, true)).toEqual({
          content: "",
          calls: expected.calls,
        });
      expect(streamed([...text], true, true)).toEqual({ content: "", calls: expected.calls });
    },
  );

  it("streamed arguments: the call starts at its name, its arguments go out before it closes", () => {
    const p = parser(true, true);
    expect(p.push('<tool_call>\n{"name": "get_time", "arg')).toEqual([]);
    expect(p.push('uments": {"timezone": "U')).toEqual([
      { kind: "start", name: "get_time" },
      { kind: "arguments", arguments: '{"timezone": "U' },
    ]);
    expect(p.push('TC"}')).toEqual([{ kind: "arguments", arguments: 'TC"' }]);
    expect(p.push("}\n</tool_call>")).toEqual([{ kind: "arguments", arguments: "}" }]);
    // A forced call cut short (max_tokens) stays a cut call, not content.
    const cut = parser(true, true);
    cut.push('<tool_call>\n{"name": "get_time", "arguments": {"timezone": "U');
    expect(cut.finish()).toEqual([]);
    expect(cut.callCount).toBe(1);
  });

  it("a streamed call: its header (id, type, name) first, then its arguments", () => {
    const [head, args] = toolCallDeltas(2, weatherCall);
    expect(head).toEqual({
      index: 2,
      id: expect.stringMatching(/^call_[0-9a-f]{24}$/),
      type: "function",
      function: { name: "get_weather", arguments: "" },
    });
    expect(args).toEqual({ index: 2, function: { arguments: weatherCall.arguments } });
  });

  it("every call gets its own id", () => {
    const { calls } = parseToolCalls(parser(), `${weather}${weather}`);
    expect(calls[0]!.id).not.toBe(calls[1]!.id);
  });
});
