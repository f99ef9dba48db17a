/** Tool calls in the chat responses built from synthetic engine events (model with the Hermes parser). */
import { describe, expect, it } from "vitest";
import type { EngineEvent } from "../../../src/core/types.ts";
import type { ResponseContext } from "../../../src/protocol/output-parts.ts";
import { ChatCompletionAccumulator } from "../../../src/protocol/response.ts";
import { type ChatCompletionChunk, ChatCompletionStreamer } from "../../../src/protocol/stream.ts";
import { delta, done, finish, parse, promptEvent, tokenLogprob } from "../helpers.ts";

const ctx = { requestId: "abc", model: "served", created: 1700000000, toolParser: "hermes" as const };
const tools = [{ type: "function", function: { name: "get_time", parameters: { type: "object" } } }];
const call = '<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>';

function response(overrides: Record<string, unknown>, events: EngineEvent[], context: ResponseContext = ctx) {
  const acc = new ChatCompletionAccumulator(parse({ tools, ...overrides }), context);
  for (const e of events) acc.push(e);
  return acc.result();
}

function chunks(overrides: Record<string, unknown>, events: EngineEvent[]): ChatCompletionChunk[] {
  const s = new ChatCompletionStreamer(parse({ tools, stream: true, ...overrides }), ctx);
  return events
    .flatMap((e) => s.push(e))
    .map((f) => {
      if (f.type !== "chunk") throw new Error("unexpected error frame");
      return f.data;
    });
}

/** A text split into per-token deltas of a few characters. */
function deltas(choice: number, text: string, size = 5): EngineEvent[] {
  const out: EngineEvent[] = [];
  for (let i = 0; i < text.length; i += size) out.push(delta(choice, text.slice(i, i + size), [i]));
  return out;
}

describe("tool calls in a full response", () => {
  it("auto: the call is parsed, content is the text around it, finish_reason tool_calls", () => {
    const r = response({ tool_choice: "auto" }, [
      promptEvent([1]),
      ...deltas(0, `Checking. ${call}`),
      finish(0, 9),
      done,
    ]);
    const c = r.choices[0]!;
    expect(c.finish_reason).toBe("tool_calls");
    expect(c.message.content).toBe("Checking.");
    expect(c.message.tool_calls).toEqual([
      {
        id: expect.stringMatching(/^call_/),
        type: "function",
        function: { name: "get_time", arguments: '{"tz": "UTC"}' },
      },
    ]);
  });

  it("none, or a model without a parser: the text is content, calls and all", () => {
    for (const [overrides, context] of [
      [{ tool_choice: "none" }, ctx],
      [{ tool_choice: "auto" }, { ...ctx, toolParser: undefined }],
    ] as const) {
      const r = response(overrides, [promptEvent([1]), delta(0, call, [5]), finish(0, 1), done], context);
      expect(r.choices[0]!.message).toMatchObject({ content: call, tool_calls: [] });
      expect(r.choices[0]!.finish_reason).toBe("stop");
    }
  });

  it("a call cut off by max_tokens stays content with finish_reason length", () => {
    const cut = call.slice(0, 30);
    const r = response({ tool_choice: "auto" }, [
      promptEvent([1]),
      delta(0, cut, [5]),
      finish(0, 1, "length"),
      done,
    ]);
    expect(r.choices[0]!).toMatchObject({
      finish_reason: "length",
      message: { content: cut, tool_calls: [] },
    });
  });

  it("n = 2: each choice parsed on its own", () => {
    const r = response({ tool_choice: "auto", n: 2 }, [
      promptEvent([1]),
      delta(0, call, [5]),
      delta(1, "plain", [6]),
      finish(0, 1),
      finish(1, 1),
      done,
    ]);
    expect(r.choices.map((c) => [c.finish_reason, c.message.content, c.message.tool_calls.length])).toEqual([
      ["tool_calls", null, 1],
      ["stop", "plain", 0],
    ]);
  });
});

describe("tool calls in a stream", () => {
  it("content deltas, then the call's header and arguments, then finish_reason tool_calls", () => {
    const out = chunks({ tool_choice: "auto" }, [
      promptEvent([1]),
      ...deltas(0, `Hi ${call}`),
      finish(0, 9),
      done,
    ]);
    const ds = out.map((c) => c.choices[0]!);
    expect(ds.map((c) => c.delta.content ?? "").join("")).toBe("Hi");
    const toolDeltas = ds.flatMap((c) => c.delta.tool_calls ?? []);
    expect(toolDeltas).toEqual([
      {
        index: 0,
        id: expect.stringMatching(/^call_/),
        type: "function",
        function: { name: "get_time", arguments: "" },
      },
      { index: 0, function: { arguments: '{"tz": "UTC"}' } },
    ]);
    expect(ds.at(-1)!.finish_reason).toBe("tool_calls");
  });

  it("a forced call streams its arguments in pieces as they arrive; they add up to the full response's", () => {
    const named = { tool_choice: { type: "function", function: { name: "get_time" } } };
    const events = [
      promptEvent([1]),
      ...deltas(0, `<tool_call>\n${call.slice(11, -12)}\n</tool_call>`, 4),
      finish(0, 20),
    ];
    const out = chunks(named, [...events, done]);
    const toolDeltas = out.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(toolDeltas[0]).toMatchObject({
      index: 0,
      type: "function",
      function: { name: "get_time", arguments: "" },
    });
    const pieces = toolDeltas.slice(1).map((d) => d.function.arguments);
    expect(pieces.length).toBeGreaterThan(2);
    const whole = response(named, [...events, done]).choices[0]!.message.tool_calls[0]!.function.arguments;
    expect(pieces.join("")).toBe(whole);
    expect(out.at(-1)!.choices[0]!.finish_reason).toBe("tool_calls");
  });

  it("logprobs and token ids of held-back text still arrive, in a chunk of their own", () => {
    const out = chunks({ tool_choice: "auto", logprobs: true, return_token_ids: true }, [
      promptEvent([1]),
      delta(0, "<tool", [7], [tokenLogprob(7, "<tool", -0.5)]),
      finish(0, 1),
      done,
    ]);
    const held = out.find((c) => c.choices[0]?.token_ids?.[0] === 7)!;
    expect(held.choices[0]!.delta).toEqual({});
    expect(held.choices[0]!.logprobs!.content).toHaveLength(1);
    // The unfinished tag is content once the choice ends.
    expect(out.some((c) => c.choices[0]?.delta.content === "<tool")).toBe(true);
  });

  it("two calls get indexes 0 and 1; parallel_tool_calls=false streams only the first", () => {
    for (const parallel of [true, false]) {
      const out = chunks({ tool_choice: "auto", parallel_tool_calls: parallel }, [
        promptEvent([1]),
        delta(0, call + call, [5]),
        finish(0, 1),
        done,
      ]);
      const indexes = out
        .flatMap((c) => c.choices[0]?.delta.tool_calls ?? [])
        .filter((d) => d.id)
        .map((d) => d.index);
      expect(indexes).toEqual(parallel ? [0, 1] : [0]);
    }
  });
});
