/**
 * The Responses translation both ways: Responses requests into the chat request (input items,
 * instructions, tools, tool_choice, text.format, sampling, refusals naming the Responses field),
 * and engine events back out as the response object and the Responses event sequence (statuses,
 * usage, function_call items, argument deltas, sequence numbers, errors after the first event).
 */
import { describe, expect, it } from "vitest";
import type { EngineEvent } from "../../../src/core/types.ts";
import { invalidRequest } from "../../../src/errors.ts";
import { ChatCompletionAccumulator } from "../../../src/protocol/response.ts";
import { chatMessages, type InputItem, outputAsInput } from "../../../src/protocol/responses/items.ts";
import {
  inResponsesTerms,
  parseResponsesWire,
  type ResponsesRequest,
  toChatRequest,
} from "../../../src/protocol/responses/request.ts";
import { ResponsesAccumulator } from "../../../src/protocol/responses/response.ts";
import { type ResponsesEvent, ResponsesStreamer } from "../../../src/protocol/responses/stream.ts";
import { ChatCompletionStreamer } from "../../../src/protocol/stream.ts";
import { toEngineRequest } from "../../../src/protocol/to-engine.ts";
import { apiError, delta, done, expect400, finish, promptEvent, tokenLogprob } from "../helpers.ts";

const body = (over: Record<string, unknown> = {}) => ({ model: "m", input: "Weather in Paris?", ...over });
const WEATHER = {
  type: "function",
  name: "get_weather",
  description: "Forecast",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const ctx = { requestId: "abc", model: "m", toolParser: "hermes" as const };
const meta = { id: "resp_1", model: "m", createdAt: 1_700_000_000 };

function request(over: Record<string, unknown> = {}, prior: InputItem[] = []): ResponsesRequest {
  const { wire, input } = parseResponsesWire(body(over));
  return {
    id: meta.id,
    wire,
    model: wire.model,
    stream: wire.stream,
    conversation: [...prior, ...input],
    chat: toChatRequest(wire, prior, input),
  };
}

describe("Responses request → chat request", () => {
  it("a string input is one user message; instructions come first as the system message", () => {
    const req = request({ instructions: "Be brief." });
    expect(req.chat.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "Weather in Paris?" },
    ]);
    expect(req.conversation).toEqual([{ type: "message", role: "user", content: "Weather in Paris?" }]);
  });

  it("maps items: developer as system, output_text as the assistant's, calls joined to their turn, outputs as tool messages", () => {
    const req = request({
      tools: [WEATHER],
      tool_choice: "none",
      input: [
        { role: "developer", content: [{ type: "input_text", text: "Use tools." }] },
        { type: "message", role: "user", content: [{ type: "input_text", text: "Paris?" }] },
        {
          type: "message",
          id: "msg_1",
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: "Let me look.", annotations: [], logprobs: [] }],
        },
        {
          type: "function_call",
          id: "fc_1",
          call_id: "call_1",
          name: "get_weather",
          arguments: '{"city":"Paris"}',
        },
        { type: "function_call", call_id: "call_2", name: "get_weather", arguments: '{"city":"Lyon"}' },
        { type: "function_call_output", call_id: "call_1", output: "Sunny" },
        { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "Rain" }] },
      ],
    });
    expect(req.chat.messages).toEqual([
      { role: "system", content: "Use tools." },
      { role: "user", content: "Paris?" },
      {
        role: "assistant",
        content: "Let me look.",
        tool_calls: [
          {
            id: "call_1",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Paris"}' },
          },
          { id: "call_2", type: "function", function: { name: "get_weather", arguments: '{"city":"Lyon"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "Sunny" },
      { role: "tool", tool_call_id: "call_2", content: "Rain" },
    ]);
    // What is stored keeps only what the conversation needs.
    expect(req.conversation[3]).toEqual({
      type: "function_call",
      call_id: "call_1",
      name: "get_weather",
      arguments: '{"city":"Paris"}',
    });
  });

  it("a reasoning item is the reasoning of the assistant turn after it, message or call", () => {
    const think = (text: string): InputItem => ({
      type: "reasoning",
      content: [{ type: "reasoning_text", text }],
    });
    const items: InputItem[] = [
      { type: "message", role: "user", content: "Weather?" },
      think("Look it up."),
      { type: "function_call", call_id: "c", name: "f", arguments: "{}" },
      { type: "function_call_output", call_id: "c", output: "sunny" },
      think("Answer."),
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Sunny." }] },
    ];
    const messages = chatMessages(undefined, items);
    expect(messages.map((m) => [m.role, m.reasoning])).toEqual([
      ["user", undefined],
      ["assistant", "Look it up."],
      ["tool", undefined],
      ["assistant", "Answer."],
    ]);
    // Stored output goes back as input with its reasoning.
    expect(
      outputAsInput([{ type: "reasoning", content: [{ type: "reasoning_text", text: "Answer." }] }]),
    ).toEqual([think("Answer.")]);
  });

  it("a call with no text before it is an assistant turn of its own", () => {
    expect(
      chatMessages(undefined, [{ type: "function_call", call_id: "c", name: "f", arguments: "{}" }]),
    ).toEqual([
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }],
      },
    ]);
  });

  it("a previous response's input and output come before the new input", () => {
    const prior = [
      { type: "message", role: "user", content: "Hi" } as InputItem,
      ...outputAsInput([
        { type: "message", content: [{ type: "output_text", text: "Hello!" }] },
        { type: "function_call", call_id: "call_9", name: "f", arguments: "{}" },
      ]),
    ];
    const req = request({ input: "And now?", instructions: "New rules." }, prior);
    expect(req.chat.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "user"]);
    expect(req.chat.messages[2]).toMatchObject({ content: "Hello!", tool_calls: [{ id: "call_9" }] });
    expect(req.conversation).toHaveLength(4);
  });

  it("maps sampling, the token limit, tools, tool_choice and parallel calls", () => {
    const req = request({
      max_output_tokens: 7,
      temperature: 0.5,
      top_p: 0.9,
      user: "u1",
      tools: [WEATHER],
      tool_choice: { type: "function", name: "get_weather" },
      parallel_tool_calls: false,
    });
    expect(req.chat).toMatchObject({
      max_completion_tokens: 7,
      temperature: 0.5,
      top_p: 0.9,
      user: "u1",
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
      constraint_field: "tool_choice",
    });
    expect(req.chat.tools).toEqual([
      {
        type: "function",
        function: { name: "get_weather", description: "Forecast", parameters: WEATHER.parameters },
      },
    ]);
    // Tools without a tool_choice: auto, as OpenAI defaults.
    expect(request({ tools: [WEATHER] }).chat.tool_choice).toBe("auto");
    expect(request().chat.tool_choice).toBe("none");
  });

  it("text.format json_schema and json_object become the structured-output constraint", () => {
    const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"] };
    const req = request({ text: { format: { type: "json_schema", name: "x", schema, strict: true } } });
    expect(req.chat.constraint_field).toBe("response_format");
    expect(req.chat.constraint).toBeDefined();
    expect(request({ text: { format: { type: "json_object" } } }).chat.constraint).toBeDefined();
    expect(request({ text: { format: { type: "text" } } }).chat.constraint).toBeUndefined();
  });

  it("streams ask the chat stream for its usage (the final event carries it)", () => {
    expect(request({ stream: true }).chat.stream_options).toEqual({
      include_usage: true,
      continuous_usage_stats: false,
    });
  });

  it("refuses what it does not serve, naming the Responses field", () => {
    const cases: [Record<string, unknown>, string, string?][] = [
      [{ tools: [{ type: "web_search" }] }, "tools[0].type", "unsupported_parameter"],
      [
        { tools: [WEATHER], tool_choice: { type: "file_search" } },
        "tool_choice.type",
        "unsupported_parameter",
      ],
      [{ tools: [WEATHER], tool_choice: { type: "function", name: "nope" } }, "tool_choice.name"],
      [{ tool_choice: "required" }, "tool_choice"],
      [{ reasoning: { summary: "auto" } }, "reasoning.summary", "unsupported_parameter"],
      [{ truncation: "middle" }, "truncation"],
      [{ background: true }, "background", "unsupported_parameter"],
      [{ conversation: "conv_1" }, "conversation", "unsupported_parameter"],
      [
        { tools: [WEATHER], include: ["reasoning.encrypted_content", "message.output_text.logprobs"] },
        "include[1]",
        "unsupported_parameter",
      ],
      [{ top_logprobs: 3 }, "top_logprobs"],
      [{ include: ["message.output_text.logprobs"], top_logprobs: 21 }, "top_logprobs"],
      [{ text: { verbosity: "low" } }, "text.verbosity", "unsupported_parameter"],
      [{ service_tier: "flex" }, "service_tier", "unsupported_parameter"],
      [{ stream_options: { include_obfuscation: false } }, "stream_options"],
      [{ stream: true, stream_options: { include_obfuscation: true } }, "stream_options.include_obfuscation"],
      [{ frequency_penalty: 1 }, "frequency_penalty", "unknown_parameter"],
      [{ input: [] }, "input"],
      [
        { input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] },
        "input[0].content[0].type",
      ],
      [{ input: [{ type: "reasoning", summary: [] }] }, "input"],
      [
        { input: [{ type: "reasoning", content: [{ type: "summary_text", text: "x" }] }] },
        "input[0].content[0].type",
      ],
      [{ input: [{ type: "item_reference", id: "x" }] }, "input[0].type", "unsupported_parameter"],
      [{ input: [{ type: "web_search_call" }] }, "input[0].type", "unsupported_parameter"],
      [{ input: [{ role: "tool", content: "x" }] }, "input[0].role"],
      [
        { input: [{ role: "user", content: [{ type: "output_text", text: "x" }] }] },
        "input[0].content[0].type",
      ],
      [{ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "metadata"],
      [{ max_output_tokens: 0 }, "max_output_tokens"],
    ];
    for (const [over, param, code] of cases) {
      const err = apiError(() => request(over));
      expect({ param: err.param, status: err.status }, JSON.stringify(over)).toEqual({ param, status: 400 });
      if (code) expect(err.code, JSON.stringify(over)).toBe(code);
      expect(err.message).toContain(param.split(/[.[]/)[0]);
    }
    // A previous_response_id alone needs no input.
    expect(parseResponsesWire({ model: "m", previous_response_id: "resp_1" }).input).toEqual([]);
    expect400(() => parseResponsesWire({ model: "m" }), "input");
  });

  it("a schema the structured-output backend refuses is named as text.format.schema", () => {
    const req = request({
      text: {
        format: {
          type: "json_schema",
          name: "x",
          schema: { type: "object", properties: { a: { type: "integer", multipleOf: 2 } } },
        },
      },
    });
    const err = apiError(() =>
      toEngineRequest(req.chat, {
        requestId: "r",
        prompt: { text: "p", addSpecialTokens: false },
        vocabSize: 100,
      }),
    );
    expect(err.param).toBe("response_format.json_schema.schema");
    const renamed = inResponsesTerms(err);
    expect(renamed.param).toBe("text.format.schema");
    expect(renamed.message).toContain("text.format.schema");
    expect(renamed.message).toContain("multipleOf");
    expect(
      inResponsesTerms(invalidRequest("max_completion_tokens is too large", "max_completion_tokens")).param,
    ).toBe("max_output_tokens");
  });
});

const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';

function respond(over: Record<string, unknown>, events: EngineEvent[]) {
  const req = request(over);
  const acc = new ResponsesAccumulator(new ChatCompletionAccumulator(req.chat, ctx), req, meta);
  for (const e of events) acc.push(e);
  return acc.result();
}

function streamed(over: Record<string, unknown>, events: EngineEvent[]): ResponsesEvent[] {
  const req = request({ ...over, stream: true });
  const s = new ResponsesStreamer(new ChatCompletionStreamer(req.chat, ctx), req, meta);
  return events.flatMap((e) => s.push(e, 0)).map((f) => f.data as ResponsesEvent);
}

describe("engine events → response object", () => {
  it("a text reply: one message of output_text, completed, usage in the Responses shape", () => {
    const r = respond({ instructions: "Be brief.", metadata: { a: "b" } }, [
      promptEvent([1, 2, 3, 4], 2),
      delta(0, "Hi", [5]),
      delta(0, " there", [6]),
      finish(0, 2),
      done,
    ]);
    expect(r).toMatchObject({
      id: "resp_1",
      object: "response",
      created_at: 1_700_000_000,
      status: "completed",
      incomplete_details: null,
      error: null,
      instructions: "Be brief.",
      model: "m",
      metadata: { a: "b" },
      store: true,
      tool_choice: "none",
      tools: [],
      text: { format: { type: "text" } },
      usage: {
        input_tokens: 4,
        input_tokens_details: { cached_tokens: 2, cache_write_tokens: 0 },
        output_tokens: 2,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 6,
      },
    });
    expect(r.output).toEqual([
      {
        id: expect.stringMatching(/^msg_[0-9a-f]{48}$/),
        type: "message",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: "Hi there", annotations: [], logprobs: [] }],
      },
    ]);
  });

  it("the token limit leaves it incomplete, reason max_output_tokens", () => {
    const r = respond({ max_output_tokens: 1 }, [
      promptEvent([1]),
      delta(0, "Hi", [5]),
      finish(0, 1, "length"),
      done,
    ]);
    expect(r.status).toBe("incomplete");
    expect(r.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(r.output[0]).toMatchObject({ type: "message", status: "incomplete" });
    expect(r.max_output_tokens).toBe(1);
  });

  it("a parsed call: text, then a function_call item with the call's id and JSON arguments", () => {
    const r = respond({ tools: [WEATHER] }, [
      promptEvent([1]),
      delta(0, `Sure. ${CALL}`, [5, 6]),
      finish(0, 2),
      done,
    ]);
    expect(r.status).toBe("completed");
    expect(r.output).toHaveLength(2);
    expect(r.output[0]).toMatchObject({ type: "message", content: [{ text: "Sure." }] });
    expect(r.output[1]).toEqual({
      id: expect.stringMatching(/^fc_/),
      type: "function_call",
      status: "completed",
      call_id: expect.stringMatching(/^call_/),
      name: "get_weather",
      arguments: '{"city": "Paris"}',
    });
    expect(r.tools).toEqual([{ ...WEATHER, strict: null }]);
    expect(r.tool_choice).toBe("auto");
  });

  it("only a call: no empty message before it", () => {
    const r = respond({ tools: [WEATHER] }, [promptEvent([1]), delta(0, CALL, [5]), finish(0, 1), done]);
    expect(r.output.map((o) => o.type)).toEqual(["function_call"]);
  });
});

describe("output logprobs (include message.output_text.logprobs)", () => {
  const lp = (id: number, token: string, logprob: number) => tokenLogprob(id, token, logprob, [[9, "x", -3]]);
  const asked = { include: ["message.output_text.logprobs"], top_logprobs: 1 };

  it("reach the chat request as logprobs and top_logprobs", () => {
    expect(request(asked).chat).toMatchObject({ logprobs: true, top_logprobs: 1 });
    expect(request().chat).toMatchObject({ logprobs: false, top_logprobs: 0 });
  });

  it("the response's output_text carries every token's logprob, top_logprobs echoed", () => {
    const r = respond(asked, [
      promptEvent([1]),
      delta(0, "Hi", [5], [lp(5, "Hi", -0.5)]),
      delta(0, " there", [6], [lp(6, " there", -1.25)]),
      finish(0, 2),
      done,
    ]);
    expect(r.top_logprobs).toBe(1);
    const part = (r.output[0] as { content: { logprobs: unknown[] }[] }).content[0]!;
    expect(part.logprobs).toEqual([
      {
        token: "Hi",
        logprob: -0.5,
        bytes: [72, 105],
        top_logprobs: [{ token: "x", logprob: -3, bytes: [120] }],
      },
      {
        token: " there",
        logprob: -1.25,
        bytes: [...new TextEncoder().encode(" there")],
        top_logprobs: [{ token: "x", logprob: -3, bytes: [120] }],
      },
    ]);
  });

  it("each delta carries its tokens' logprobs; a token with no text yet joins the next delta; done has them all", () => {
    const events = streamed(asked, [
      promptEvent([1]),
      delta(0, "Hi", [5], [lp(5, "Hi", -0.5)]),
      delta(0, "", [7], [lp(7, "\ufffd", -2)]),
      delta(0, "!", [8], [lp(8, "!", -0.25)]),
      finish(0, 3),
      done,
    ]);
    const deltas = events.filter((e) => e.type === "response.output_text.delta") as Extract<
      ResponsesEvent,
      { type: "response.output_text.delta" }
    >[];
    expect(deltas.map((d) => [d.delta, d.logprobs.map((l) => l.logprob)])).toEqual([
      ["Hi", [-0.5]],
      ["!", [-2, -0.25]],
    ]);
    const doneEvent = events.find((e) => e.type === "response.output_text.done") as Extract<
      ResponsesEvent,
      { type: "response.output_text.done" }
    >;
    expect(doneEvent.logprobs.map((l) => l.logprob)).toEqual([-0.5, -2, -0.25]);
    const last = events.at(-1) as Extract<ResponsesEvent, { type: "response.completed" }>;
    const part = (last.response.output[0] as { content: { logprobs: { logprob: number }[] }[] }).content[0]!;
    expect(part.logprobs.map((l) => l.logprob)).toEqual([-0.5, -2, -0.25]);
  });
});

describe("engine events → Responses stream", () => {
  it("text: created, in_progress, the message item's events, completed; numbered from 0", () => {
    const events = streamed({}, [
      promptEvent([1, 2, 3]),
      delta(0, "Hi", [5]),
      delta(0, " there", [6]),
      finish(0, 2),
      done,
    ]);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const created = events[0] as Extract<ResponsesEvent, { type: "response.created" }>;
    expect(created.response).toMatchObject({ status: "in_progress", output: [], usage: null });
    const added = events[2] as Extract<ResponsesEvent, { type: "response.output_item.added" }>;
    expect(added.item).toMatchObject({ type: "message", status: "in_progress", content: [] });
    const id = added.item.id;
    expect(events[5]).toMatchObject({ item_id: id, output_index: 0, content_index: 0, delta: " there" });
    expect(events[6]).toMatchObject({ item_id: id, text: "Hi there" });
    const completed = events[9] as Extract<ResponsesEvent, { type: "response.completed" }>;
    expect(completed.response.status).toBe("completed");
    expect(completed.response.usage).toMatchObject({ input_tokens: 3, output_tokens: 2, total_tokens: 5 });
    expect(completed.response.output).toEqual([
      {
        id,
        type: "message",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: "Hi there", annotations: [], logprobs: [] }],
      },
    ]);
  });

  it("the token limit ends it with response.incomplete", () => {
    const events = streamed({ max_output_tokens: 1 }, [
      promptEvent([1]),
      delta(0, "Hi", [5]),
      finish(0, 1, "length"),
      done,
    ]);
    const last = events.at(-1) as Extract<ResponsesEvent, { type: "response.incomplete" }>;
    expect(last.type).toBe("response.incomplete");
    expect(last.response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(last.response.output[0]!.status).toBe("incomplete");
  });

  it("an empty answer is still one message item", () => {
    const events = streamed({}, [promptEvent([1]), finish(0, 0), done]);
    const last = events.at(-1) as Extract<ResponsesEvent, { type: "response.completed" }>;
    expect(last.response.output).toMatchObject([{ type: "message", content: [{ text: "" }] }]);
  });

  it("a forced call: a function_call item whose argument deltas join to the arguments", () => {
    const pieces = [
      '<tool_call>\n{"name": "get_weather", ',
      '"arguments": {"ci',
      'ty": "Paris"}',
      "}\n</tool_call>",
    ];
    const events = streamed({ tools: [WEATHER], tool_choice: { type: "function", name: "get_weather" } }, [
      promptEvent([1]),
      ...pieces.map((p, i) => delta(0, p, [i])),
      finish(0, 4),
      done,
    ]);
    const added = events.find((e) => e.type === "response.output_item.added") as Extract<
      ResponsesEvent,
      { type: "response.output_item.added" }
    >;
    expect(added.item).toMatchObject({
      type: "function_call",
      name: "get_weather",
      arguments: "",
      status: "in_progress",
    });
    const args = events
      .flatMap((e) => (e.type === "response.function_call_arguments.delta" ? [e.delta] : []))
      .join("");
    expect(JSON.parse(args)).toEqual({ city: "Paris" });
    const argsDone = events.find((e) => e.type === "response.function_call_arguments.done") as Extract<
      ResponsesEvent,
      { type: "response.function_call_arguments.done" }
    >;
    expect(argsDone).toMatchObject({ arguments: args, item_id: added.item.id, output_index: 0 });
    const last = events.at(-1) as Extract<ResponsesEvent, { type: "response.completed" }>;
    expect(last.response.output).toEqual([{ ...added.item, status: "completed", arguments: args }]);
  });

  it("text then a parsed call: the message item is done before the call's item is added", () => {
    const events = streamed({ tools: [WEATHER] }, [
      promptEvent([1]),
      delta(0, "Sure. ", [1]),
      delta(0, CALL, [2]),
      finish(0, 2),
      done,
    ]);
    const items = events.flatMap((e) =>
      e.type === "response.output_item.added" || e.type === "response.output_item.done"
        ? [`${e.type.slice("response.output_item.".length)}:${e.output_index}:${e.item.type}`]
        : [],
    );
    expect(items).toEqual([
      "added:0:message",
      "done:0:message",
      "added:1:function_call",
      "done:1:function_call",
    ]);
  });

  it("an engine error after the first event is an error event, numbered; before it, a plain error", () => {
    const req = request({ stream: true });
    const s = new ResponsesStreamer(new ChatCompletionStreamer(req.chat, ctx), req, meta);
    const early = s.push({ type: "error", code: "invalid_request", message: "too long" }, 0);
    expect(early.map((f) => f.type)).toEqual(["error"]);

    const t = new ResponsesStreamer(new ChatCompletionStreamer(req.chat, ctx), req, meta);
    const started = [promptEvent([1]), delta(0, "Hi", [1])].flatMap((e) => t.push(e, 0));
    const failed = t.push({ type: "error", code: "engine_failure", message: "boom" }, 0);
    expect(failed).toEqual([
      {
        type: "chunk",
        data: {
          type: "error",
          code: "internal_error",
          message: "boom",
          param: null,
          sequence_number: started.length,
        },
      },
    ]);
  });
});
