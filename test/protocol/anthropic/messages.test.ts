/**
 * The Messages translation both ways: Anthropic requests into the chat request (messages, tools,
 * tool_choice, sampling, refusals naming the Anthropic field), and engine events back out as
 * Anthropic's message and stream events (stop reasons, usage, tool_use blocks, input_json_delta).
 */
import { describe, expect, it } from "vitest";
import type { EngineEvent } from "../../../src/core/types.ts";
import { ApiError } from "../../../src/errors.ts";
import { anthropicErrorBody } from "../../../src/protocol/anthropic/errors.ts";
import {
  parseCountTokensRequest,
  parseMessagesRequest,
} from "../../../src/protocol/anthropic/messages-request.ts";
import { MessagesAccumulator } from "../../../src/protocol/anthropic/messages-response.ts";
import { type MessagesEvent, MessagesStreamer } from "../../../src/protocol/anthropic/messages-stream.ts";
import { ChatCompletionAccumulator } from "../../../src/protocol/response.ts";
import { ChatCompletionStreamer } from "../../../src/protocol/stream.ts";
import { apiError, delta, done, expect400, finish, promptEvent } from "../helpers.ts";

const USER = { role: "user", content: "Weather in Paris?" };
const body = (over: Record<string, unknown> = {}) => ({
  model: "m",
  max_tokens: 32,
  messages: [USER],
  ...over,
});
const WEATHER = {
  name: "get_weather",
  description: "Forecast",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const ctx: { requestId: string; model: string; toolParser: "hermes"; reasoning?: { opened: boolean } } = {
  requestId: "abc",
  model: "m",
  toolParser: "hermes",
};
/** A reasoning model whose prompt opened the think block. */
const thinker = { ...ctx, reasoning: { opened: true } };

describe("Messages request → chat request", () => {
  it("maps system, turns, tool_use and tool_result onto chat messages", () => {
    const req = parseMessagesRequest(
      body({
        system: [
          { type: "text", text: "Be brief." },
          { type: "text", text: "Use tools.", cache_control: { type: "ephemeral" } },
        ],
        tools: [WEATHER],
        messages: [
          USER,
          {
            role: "assistant",
            content: [
              { type: "text", text: "Let me look." },
              { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
            ],
          },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: "toolu_1", content: "Sunny" },
              {
                type: "tool_result",
                tool_use_id: "toolu_2",
                content: [{ type: "text", text: "down" }],
                is_error: true,
              },
              { type: "text", text: "And tomorrow?" },
            ],
          },
        ],
      }),
    );
    expect(req.chat.messages).toEqual([
      { role: "system", content: "Be brief.\nUse tools." },
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "Let me look.",
        tool_calls: [
          {
            id: "toolu_1",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Paris"}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "toolu_1", content: "Sunny" },
      { role: "tool", tool_call_id: "toolu_2", content: "Error: down" },
      { role: "user", content: "And tomorrow?" },
    ]);
    expect(req.chat.tools).toEqual([
      {
        type: "function",
        function: { name: "get_weather", description: "Forecast", parameters: WEATHER.input_schema },
      },
    ]);
    // Tools without tool_choice: auto, as Anthropic's default.
    expect(req.chat.tool_choice).toBe("auto");
    expect(req.chat.constraint).toBeUndefined();
  });

  it("maps the sampling fields and the token limit", () => {
    const req = parseMessagesRequest(
      body({
        max_tokens: 7,
        stop_sequences: ["END"],
        temperature: 0.5,
        top_p: 0.9,
        top_k: 40,
        metadata: { user_id: "u1" },
        stream: true,
      }),
    );
    expect(req.stream).toBe(true);
    expect(req.chat).toMatchObject({
      max_tokens: 7,
      stop: ["END"],
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
      user: "u1",
      stream: true,
      stream_options: { include_usage: true },
      tool_choice: "none",
    });
  });

  it("maps tool_choice any and tool onto chat's forced calls, disable_parallel_tool_use onto one call", () => {
    const any = parseMessagesRequest(body({ tools: [WEATHER], tool_choice: { type: "any" } })).chat;
    expect(any.tool_choice).toBe("required");
    expect(any.parallel_tool_calls).toBe(true);
    expect(any.constraint_field).toBe("tool_choice");
    const one = parseMessagesRequest(
      body({ tools: [WEATHER], tool_choice: { type: "any", disable_parallel_tool_use: true } }),
    ).chat;
    expect(one.parallel_tool_calls).toBe(false);
    const named = parseMessagesRequest(
      body({ tools: [WEATHER], tool_choice: { type: "tool", name: "get_weather" } }),
    ).chat;
    expect(named.tool_choice).toEqual({ type: "function", function: { name: "get_weather" } });
    expect(named.constraint?.kind).toBe("structural_tag");
    const none = parseMessagesRequest(body({ tools: [WEATHER], tool_choice: { type: "none" } })).chat;
    expect(none.tool_choice).toBe("none");
  });

  it("refuses what it does not serve, naming the Anthropic field", () => {
    expect400(
      () => parseMessagesRequest({ model: "m", messages: [USER] }),
      "max_tokens",
      "missing_required_parameter",
    );
    expect400(() => parseMessagesRequest(body({ max_tokens: 0 })), "max_tokens");
    expect400(() => parseMessagesRequest(body({ temperature: 1.5 })), "temperature");
    // Anthropic's ranges for a thinking budget: at least 1024, and fewer than max_tokens.
    expect400(
      () => parseMessagesRequest(body({ thinking: { type: "enabled", budget_tokens: 1023 } })),
      "thinking.budget_tokens",
    );
    const over = expect400(
      () =>
        parseMessagesRequest(body({ max_tokens: 1024, thinking: { type: "enabled", budget_tokens: 1024 } })),
      "thinking.budget_tokens",
    );
    expect(over.message).toContain("max_tokens");
    expect400(() => parseMessagesRequest(body({ thinking: { type: "enabled" } })), "thinking.budget_tokens");
    expect400(() => parseMessagesRequest(body({ thinking: { type: "adaptive" } })), "thinking.type");
    const enabled = parseMessagesRequest(
      body({ max_tokens: 4096, thinking: { type: "enabled", budget_tokens: 2000 } }),
    ).chat;
    expect(enabled.chat_template_kwargs).toEqual({ enable_thinking: true });
    expect(enabled.thinking_token_budget).toBe(2000);
    const disabled = parseMessagesRequest(body({ thinking: { type: "disabled" } })).chat;
    expect(disabled.messages).toHaveLength(1);
    expect(disabled.chat_template_kwargs).toEqual({ enable_thinking: false });
    expect(parseMessagesRequest(body()).chat.chat_template_kwargs).toBeUndefined();
    expect400(
      () => parseMessagesRequest(body({ service_tier: "auto" })),
      "service_tier",
      "unknown_parameter",
    );
    expect400(
      () =>
        parseMessagesRequest(
          body({ messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }),
        ),
      "messages[0].content[0].type",
      "unsupported_parameter",
    );
    expect400(
      () => parseMessagesRequest(body({ messages: [{ role: "system", content: "x" }] })),
      "messages[0].role",
    );
    expect400(
      () => parseMessagesRequest(body({ messages: [{ role: "user", content: [] }] })),
      "messages[0].content",
    );
    expect400(() => parseMessagesRequest(body({ tool_choice: { type: "any" } })), "tool_choice");
    expect400(
      () => parseMessagesRequest(body({ tools: [WEATHER], tool_choice: { type: "tool", name: "nope" } })),
      "tool_choice.name",
    );
    // A forced call's schema is checked by the chat rules; the error names input_schema.
    const refused = expect400(
      () =>
        parseMessagesRequest(
          body({
            tools: [
              {
                name: "f",
                input_schema: { type: "object", properties: { n: { type: "integer", multipleOf: 3 } } },
              },
            ],
            tool_choice: { type: "any" },
          }),
        ),
      "tools[0].input_schema",
    );
    expect(refused.message).not.toContain("function.parameters");
  });

  it("output_config.format is chat's json_schema constraint; null is absent; other types are a 400", () => {
    const schema = { type: "object", properties: { color: { type: "string" } }, required: ["color"] };
    const req = parseMessagesRequest(body({ output_config: { format: { type: "json_schema", schema } } }));
    // The schema as written, its whitespace left to the model's default.
    expect(req.chat.constraint).toEqual({ kind: "json_schema", schema: JSON.stringify(schema) });
    expect(req.chat.constraint_field).toBe("response_format");
    for (const output_config of [null, {}, { format: null, effort: null }]) {
      const plain = parseMessagesRequest(body({ output_config }));
      expect(plain.chat.constraint).toBeUndefined();
      expect(plain.effort).toBeUndefined();
    }
    expect400(
      () => parseMessagesRequest(body({ output_config: { format: { type: "json_object" } } })),
      "output_config.format.type",
      "invalid_value",
    );
    expect400(
      () => parseMessagesRequest(body({ output_config: { format: { type: "json_schema" } } })),
      "output_config.format.schema",
    );
    expect400(
      () => parseMessagesRequest(body({ output_config: { verbosity: "low" } })),
      "output_config.verbosity",
    );
    // count_tokens takes it too (the SDK sends it there): the format binds no prompt token.
    expect(
      parseCountTokensRequest({
        model: "m",
        messages: [USER],
        output_config: { format: { type: "json_schema", schema }, effort: "low" },
      }).effort,
    ).toBe("low");
  });

  it("output_config.format with a forced tool call is two constraints: a 400 in Messages terms", () => {
    for (const [tool_choice, named] of [
      [{ type: "any" }, 'tool_choice of type "any"'],
      [{ type: "tool", name: "get_weather" }, 'tool_choice of type "tool"'],
    ] as const) {
      const e = expect400(
        () =>
          parseMessagesRequest(
            body({
              tools: [WEATHER],
              tool_choice,
              output_config: { format: { type: "json_schema", schema: { type: "object" } } },
            }),
          ),
        "tool_choice",
      );
      expect(e.message).toContain(named);
      expect(e.message).toContain("output_config.format");
      expect(e.message).not.toMatch(/response_format|required/);
    }
    // auto leaves calls to the parser: the format binds the text.
    const auto = parseMessagesRequest(
      body({
        tools: [WEATHER],
        tool_choice: { type: "auto" },
        output_config: { format: { type: "json_schema", schema: { type: "object" } } },
      }),
    );
    expect(auto.chat.constraint?.kind).toBe("json_schema");
  });

  it("output_config.effort is kept for the model's template (set once the model is known)", () => {
    for (const effort of ["low", "medium", "high", "xhigh", "max"] as const) {
      const req = parseMessagesRequest(body({ output_config: { effort } }));
      expect(req.effort).toBe(effort);
      expect(req.chat.reasoning_effort).toBeUndefined();
    }
    expect400(
      () => parseMessagesRequest(body({ output_config: { effort: "extreme" } })),
      "output_config.effort",
    );
  });

  it("count_tokens takes the prompt fields only", () => {
    expect(parseCountTokensRequest({ model: "m", messages: [USER], system: "s" }).chat.messages).toHaveLength(
      2,
    );
    expect400(() => parseCountTokensRequest({ model: "m", messages: [USER], max_tokens: 5 }), "max_tokens");
  });

  it("errors take Anthropic's shape, the status picking the type", () => {
    const e = apiError(() => parseMessagesRequest(body({ max_tokens: "x" })));
    expect(anthropicErrorBody(e)).toEqual({
      type: "error",
      error: { type: "invalid_request_error", message: e.message },
    });
  });
});

function message(over: Record<string, unknown>, events: EngineEvent[], context: typeof ctx = ctx) {
  const req = parseMessagesRequest(body(over));
  const acc = new MessagesAccumulator(new ChatCompletionAccumulator(req.chat, context));
  for (const e of events) acc.push(e);
  return acc.result();
}

function streamed(
  over: Record<string, unknown>,
  events: EngineEvent[],
  context: typeof ctx = ctx,
): MessagesEvent[] {
  const req = parseMessagesRequest(body({ ...over, stream: true }));
  const s = new MessagesStreamer(new ChatCompletionStreamer(req.chat, context), context);
  return events.flatMap((e) => s.push(e, 0)).map((f) => f.data as MessagesEvent);
}

const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';

describe("engine events → Messages response", () => {
  it("a text reply: one text block, end_turn, usage with cached tokens apart", () => {
    const msg = message({}, [
      promptEvent([1, 2, 3, 4], 2),
      delta(0, "Hi", [5]),
      delta(0, " there", [6]),
      finish(0, 2),
      done,
    ]);
    expect(msg).toEqual({
      id: "msg_abc",
      type: "message",
      role: "assistant",
      model: "m",
      content: [{ type: "text", text: "Hi there" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: {
        input_tokens: 2,
        output_tokens: 2,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 2,
      },
    });
  });

  it("stop reasons: max_tokens for length, stop_sequence naming the string", () => {
    expect(
      message({}, [promptEvent([1]), delta(0, "a", [5]), finish(0, 1, "length"), done]).stop_reason,
    ).toBe("max_tokens");
    const stop = message({ stop_sequences: ["END"] }, [
      promptEvent([1]),
      delta(0, "a", [5]),
      finish(0, 1, "stop", "END"),
      done,
    ]);
    expect({ reason: stop.stop_reason, seq: stop.stop_sequence }).toEqual({
      reason: "stop_sequence",
      seq: "END",
    });
    // A stop token id (EOS) is the end of the turn.
    expect(
      message({}, [promptEvent([1]), delta(0, "a", [5]), finish(0, 1, "stop", 2), done]).stop_reason,
    ).toBe("end_turn");
  });

  it("a tool call: a tool_use block with its input as an object, stop_reason tool_use", () => {
    const msg = message({ tools: [WEATHER] }, [
      promptEvent([1]),
      delta(0, `Sure. ${CALL}`, [5, 6]),
      finish(0, 2),
      done,
    ]);
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.content).toEqual([
      { type: "text", text: "Sure." },
      {
        type: "tool_use",
        id: expect.stringMatching(/^toolu_[0-9a-f]{24}$/),
        name: "get_weather",
        input: { city: "Paris" },
      },
    ]);
  });
});

describe("engine events → Messages stream", () => {
  it("an error once the stream began names the Messages field", () => {
    const req = parseMessagesRequest(
      body({ stream: true, output_config: { format: { type: "json_schema", schema: { type: "object" } } } }),
    );
    const s = new MessagesStreamer(new ChatCompletionStreamer(req.chat, ctx), ctx);
    const frames = s.push(
      {
        type: "error",
        code: "invalid_request",
        message: "response_format: the grammar failed to compile",
        param: "response_format",
      },
      0,
    );
    const error = frames.find((f) => f.data && "error" in (f.data as object));
    expect(error?.data).toMatchObject({
      error: {
        message: "output_config.format: the grammar failed to compile",
        param: "output_config.format",
      },
    });
    const failed = s.fail(
      new ApiError(400, "invalid_request_error", "response_format is wrong", "response_format"),
    );
    expect(failed.data).toMatchObject({ error: { param: "output_config.format" } });
  });

  it("text: message_start, ping, one block of text deltas, message_delta, message_stop", () => {
    const events = streamed({}, [
      promptEvent([1, 2, 3]),
      delta(0, "Hi", [5]),
      delta(0, " there", [6]),
      finish(0, 2),
      done,
    ]);
    expect(events.map((e) => e.type)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    const start = events[0] as Extract<MessagesEvent, { type: "message_start" }>;
    expect(start.message.usage.input_tokens).toBe(3);
    expect(start.message.stop_reason).toBeNull();
    expect(events[2]).toEqual({
      type: "content_block_start",
      index: 0,
      content_block: { type: "text", text: "" },
    });
    expect(events[4]).toEqual({
      type: "content_block_delta",
      index: 0,
      delta: { type: "text_delta", text: " there" },
    });
    expect(events[6]).toEqual({
      type: "message_delta",
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: 2 },
    });
  });

  it("a forced call: a tool_use block whose input_json_delta pieces join to the arguments", () => {
    const pieces = [
      '<tool_call>\n{"name": "get_weather", ',
      '"arguments": {"ci',
      'ty": "Paris"}',
      "}\n</tool_call>",
    ];
    const events = streamed({ tools: [WEATHER], tool_choice: { type: "tool", name: "get_weather" } }, [
      promptEvent([1]),
      ...pieces.map((p, i) => delta(0, p, [i])),
      finish(0, 4),
      done,
    ]);
    const start = events.find((e) => e.type === "content_block_start") as Extract<
      MessagesEvent,
      { type: "content_block_start" }
    >;
    expect(start.content_block).toMatchObject({ type: "tool_use", name: "get_weather", input: {} });
    const json = events
      .flatMap((e) =>
        e.type === "content_block_delta" && e.delta.type === "input_json_delta" ? [e.delta.partial_json] : [],
      )
      .join("");
    expect(JSON.parse(json)).toEqual({ city: "Paris" });
    const end = events.find((e) => e.type === "message_delta") as Extract<
      MessagesEvent,
      { type: "message_delta" }
    >;
    expect(end.delta.stop_reason).toBe("tool_use");
    expect(events.at(-1)).toEqual({ type: "message_stop" });
  });

  it("text then a parsed call: the text block closes before the tool_use block opens", () => {
    const events = streamed({ tools: [WEATHER] }, [
      promptEvent([1]),
      delta(0, "Sure. ", [1]),
      delta(0, CALL, [2]),
      finish(0, 2),
      done,
    ]);
    const blocks = events.filter((e) => e.type === "content_block_start" || e.type === "content_block_stop");
    expect(blocks.map((e) => `${e.type}:${e.index}`)).toEqual([
      "content_block_start:0",
      "content_block_stop:0",
      "content_block_start:1",
      "content_block_stop:1",
    ]);
  });
});

describe("a reasoning model's think block", () => {
  const events = [
    promptEvent([1]),
    delta(0, "Paris in June", [5]),
    delta(0, ": mild.</think>It is", [6]),
    delta(0, " sunny.", [7]),
    finish(0, 3),
    done,
  ];

  it("is a thinking block before the text", () => {
    expect(message({}, events, thinker).content).toEqual([
      { type: "thinking", thinking: "Paris in June: mild.", signature: "" },
      { type: "text", text: "It is sunny." },
    ]);
    // Without a reasoning parser the same text is all answer.
    expect(message({}, events).content).toEqual([
      { type: "text", text: "Paris in June: mild.</think>It is sunny." },
    ]);
  });

  it("streams as thinking_delta in its own block, closed before the text block", () => {
    const out = streamed({}, events, thinker);
    const blocks = out.filter((e) => e.type === "content_block_start");
    expect(blocks.map((e) => (e as { content_block: { type: string } }).content_block.type)).toEqual([
      "thinking",
      "text",
    ]);
    const deltas = out.flatMap((e) => (e.type === "content_block_delta" ? [e] : []));
    const joined = (t: string) =>
      deltas
        .map((e) => e.delta as Record<string, string>)
        .filter((d) => d.type === t)
        .map((d) => d.thinking ?? d.text)
        .join("");
    expect(joined("thinking_delta")).toBe("Paris in June: mild.");
    expect(joined("text_delta")).toBe("It is sunny.");
    const stops = out.flatMap((e, i) => (e.type === "content_block_stop" ? [i] : []));
    expect(stops[0]).toBeLessThan(out.findIndex((e) => e.type === "content_block_start" && e.index === 1));
  });

  it("sent back in an assistant turn, reaches the template as that turn's reasoning", () => {
    const chat = parseMessagesRequest(
      body({
        messages: [
          USER,
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "Check the forecast.", signature: "sig" },
              { type: "redacted_thinking", data: "opaque" },
              { type: "text", text: "Sunny." },
            ],
          },
          { role: "user", content: "Thanks" },
        ],
      }),
    ).chat;
    expect(chat.messages[1]).toMatchObject({
      role: "assistant",
      content: "Sunny.",
      reasoning: "Check the forecast.",
    });
  });
});
