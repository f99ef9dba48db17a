/**
 * The Anthropic Messages API end to end: a real server process on the default model, driven by the
 * official `@anthropic-ai/sdk` client, unmodified — plain and streamed messages, a tool_use round
 * trip with tool_result, structured outputs (output_config.format, checked with Ajv, through create,
 * stream and the SDK's parse), count_tokens, and Anthropic's error shapes; plus vLLM's /tokenize
 * and /detokenize over plain HTTP.
 */
import { DatabaseSync } from "node:sqlite";
import Anthropic from "@anthropic-ai/sdk";
import { jsonSchemaOutputFormat } from "@anthropic-ai/sdk/helpers/json-schema";
import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DEFAULT_MODEL,
  type DefaultModelServer,
  haveDefaultModel,
  startDefaultModelServer,
} from "./server-process.ts";

const KEY = "e2e-anthropic-key-0123456789";
const WEATHER = {
  type: "object" as const,
  properties: { city: { type: "string", maxLength: 24 }, days: { type: "integer", minimum: 1 } },
  required: ["city", "days"],
  additionalProperties: false,
};
const tools: Anthropic.Tool[] = [
  { name: "get_weather", description: "Weather forecast", input_schema: WEATHER },
];
/**
 * Greedy decoding, so a stream and a plain call give the same text. The SDK's types no longer list
 * the sampling fields (newer Claude models dropped them); it sends them as given, and the API takes them.
 */
const greedy: object = { temperature: 0 };
const question: Anthropic.MessageParam[] = [
  { role: "user", content: "What is the weather in Paris for 3 days?" },
];

describe.skipIf(!haveDefaultModel)("Anthropic client against a real ortserve process", () => {
  let s: DefaultModelServer;
  let client: Anthropic;

  beforeAll(async () => {
    s = await startDefaultModelServer({ prefix: "ortserve-e2e-anthropic-", apiKey: KEY });
    client = new Anthropic({ baseURL: s.server.url, apiKey: KEY, maxRetries: 0 });
  });

  afterAll(async () => {
    await s?.close();
  });

  it("creates a message, with max_tokens as its stop reason when it runs out", async () => {
    const msg = await client.messages.create({
      model: DEFAULT_MODEL,
      max_tokens: 8,
      ...greedy,
      system: "You are terse.",
      messages: [{ role: "user", content: "Count from one to twenty in words." }],
    });
    expect(msg.type).toBe("message");
    expect(msg.role).toBe("assistant");
    expect(msg.id).toMatch(/^msg_/);
    expect(msg.model).toBe(DEFAULT_MODEL);
    expect(msg.stop_reason).toBe("max_tokens");
    expect(msg.content).toHaveLength(1);
    const block = msg.content[0]!;
    expect(block.type).toBe("text");
    expect((block as Anthropic.TextBlock).text.length).toBeGreaterThan(0);
    expect(msg.usage.output_tokens).toBe(8);
    expect(msg.usage.input_tokens).toBeGreaterThan(10);

    // The same prompt counted: count_tokens reports what the message's usage reports.
    const counted = await client.messages.countTokens({
      model: DEFAULT_MODEL,
      system: "You are terse.",
      messages: [{ role: "user", content: "Count from one to twenty in words." }],
    });
    expect(counted.input_tokens).toBe(msg.usage.input_tokens + (msg.usage.cache_read_input_tokens ?? 0));
  });

  it("ends on a stop sequence and names it", async () => {
    const msg = await client.messages.create({
      model: DEFAULT_MODEL,
      max_tokens: 64,
      ...greedy,
      stop_sequences: [" "],
      messages: [{ role: "user", content: "Say hello to the world in a full sentence." }],
    });
    expect(msg.stop_reason).toBe("stop_sequence");
    expect(msg.stop_sequence).toBe(" ");
  });

  it("streams a message the SDK's helpers assemble into the non-streamed one", async () => {
    const params = {
      model: DEFAULT_MODEL,
      max_tokens: 16,
      ...greedy,
      messages: [{ role: "user" as const, content: "Name three colours." }],
    };
    const plain = await client.messages.create(params);
    const events: string[] = [];
    const stream = client.messages.stream(params);
    stream.on("streamEvent", (e) => events.push(e.type));
    const final = await stream.finalMessage();
    expect(events[0]).toBe("message_start");
    expect(events).toContain("content_block_start");
    expect(events).toContain("content_block_delta");
    expect(events.slice(-2)).toEqual(["message_delta", "message_stop"]);
    expect(final.content).toEqual(plain.content);
    expect(final.stop_reason).toBe(plain.stop_reason);
    expect(final.usage.output_tokens).toBe(plain.usage.output_tokens);
  });

  it("runs a tool_use round trip: a forced call, then its tool_result answered in text", async () => {
    const validate = new Ajv2020({ strict: false }).compile(WEATHER);
    // One call each (disable_parallel_tool_use): "any" alone would let the tiny model call again and again.
    for (const tool_choice of [
      { type: "any", disable_parallel_tool_use: true },
      { type: "tool", name: "get_weather" },
    ] as const) {
      const msg = await client.messages.create({
        model: DEFAULT_MODEL,
        max_tokens: 64,
        ...greedy,
        tools,
        tool_choice,
        messages: question,
      });
      expect(msg.stop_reason).toBe("tool_use");
      const use = msg.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
      expect(use.name).toBe("get_weather");
      expect(use.id).toMatch(/^toolu_/);
      expect(validate(use.input), JSON.stringify(use.input)).toBe(true);

      const answer = await client.messages.create({
        model: DEFAULT_MODEL,
        max_tokens: 24,
        ...greedy,
        tools,
        tool_choice: { type: "none" },
        messages: [
          ...question,
          { role: "assistant", content: msg.content },
          {
            role: "user",
            content: [{ type: "tool_result", tool_use_id: use.id, content: "Sunny, 24 degrees." }],
          },
        ],
      });
      expect(answer.content.every((b) => b.type === "text")).toBe(true);
      expect(answer.content.length).toBeGreaterThan(0);
      // The tool result is in the prompt: it is longer than the question alone by at least its text.
      expect(answer.usage.input_tokens + (answer.usage.cache_read_input_tokens ?? 0)).toBeGreaterThan(
        msg.usage.input_tokens + (msg.usage.cache_read_input_tokens ?? 0),
      );
    }
  });

  it("streams a forced tool call as input_json_delta the SDK assembles into the input", async () => {
    const stream = client.messages.stream({
      model: DEFAULT_MODEL,
      max_tokens: 64,
      ...greedy,
      tools,
      tool_choice: { type: "tool", name: "get_weather" },
      messages: question,
    });
    const deltas: string[] = [];
    stream.on("streamEvent", (e) => {
      if (e.type === "content_block_delta") deltas.push(e.delta.type);
    });
    const final = await stream.finalMessage();
    expect(deltas).toContain("input_json_delta");
    expect(final.stop_reason).toBe("tool_use");
    const use = final.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
    expect(use.name).toBe("get_weather");
    expect(new Ajv2020({ strict: false }).compile(WEATHER)(use.input)).toBe(true);
  });

  it("answers output_config.format with JSON valid against its schema: create, stream and parse agree", async () => {
    const PERSON = {
      type: "object" as const,
      properties: {
        name: { type: "string" as const, maxLength: 20 },
        age: { type: "integer" as const, minimum: 0, maximum: 120 },
      },
      required: ["name", "age"],
      additionalProperties: false,
    };
    const validate = new Ajv2020({ strict: false }).compile(PERSON);
    const params = {
      model: DEFAULT_MODEL,
      max_tokens: 64,
      ...greedy,
      messages: [{ role: "user" as const, content: "Describe a person as JSON." }],
      output_config: { format: { type: "json_schema" as const, schema: PERSON } },
    };
    const msg = await client.messages.create(params);
    expect(msg.stop_reason).toBe("end_turn");
    expect(msg.content).toHaveLength(1);
    const text = (msg.content[0] as Anthropic.TextBlock).text;
    expect(validate(JSON.parse(text)), text).toBe(true);

    const final = await client.messages.stream(params).finalMessage();
    expect(final.content).toEqual(msg.content);

    // The SDK's own structured-output call (its schema untransformed, so every keyword is enforced).
    const parsed = await client.messages.parse({
      ...params,
      output_config: { format: jsonSchemaOutputFormat(PERSON, { transform: false }) },
    });
    expect(parsed.parsed_output).toEqual(JSON.parse(text));
  });

  it("refuses output_config it cannot honour, naming the field in Anthropic's error shape", async () => {
    const refused = async (params: object, field: string) => {
      const e = await client.messages
        .create({ model: DEFAULT_MODEL, max_tokens: 8, messages: question, ...params })
        .catch((err: unknown) => err);
      expect(e).toBeInstanceOf(Anthropic.BadRequestError);
      const body = (e as InstanceType<typeof Anthropic.BadRequestError>).error as {
        type: string;
        error: { type: string; message: string };
      };
      expect(body).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
      expect(body.error.message).toContain(field);
      return body.error.message;
    };
    await refused({ output_config: { format: { type: "json_object" } } }, "output_config.format.type");
    // An effort reaches the template as reasoning_effort: this model's template reads none.
    expect(await refused({ output_config: { effort: "high" } }, "output_config.effort")).toContain(
      "does not take a reasoning effort",
    );
    // xhigh and max mean nothing to any chat template.
    for (const effort of ["xhigh", "max"])
      expect(await refused({ output_config: { effort } }, "output_config.effort")).toContain("no meaning");
    // A forced tool call and a format are two constraints on one output.
    expect(
      await refused(
        {
          tools,
          tool_choice: { type: "any" },
          output_config: { format: { type: "json_schema", schema: WEATHER } },
        },
        "output_config.format",
      ),
    ).toContain('tool_choice of type "any"');
    // null is absent.
    const plain = await client.messages.create({
      model: DEFAULT_MODEL,
      max_tokens: 4,
      messages: question,
      output_config: { format: null, effort: null },
    });
    expect(plain.stop_reason).toBe("max_tokens");
  });

  it("refuses bad requests in Anthropic's error shape", async () => {
    const missing = await client.messages
      // @ts-expect-error: max_tokens is required; the server must say so.
      .create({ model: DEFAULT_MODEL, messages: question })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(Anthropic.BadRequestError);
    const body = (missing as InstanceType<typeof Anthropic.BadRequestError>).error as {
      type: string;
      error: { type: string; message: string };
    };
    expect(body.type).toBe("error");
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.message).toContain("max_tokens");

    const thinking = await client.messages
      .create({
        model: DEFAULT_MODEL,
        max_tokens: 2048,
        messages: question,
        thinking: { type: "enabled", budget_tokens: 1024 },
      })
      .catch((e: unknown) => e);
    // The default model has no reasoning parser: no think block to hold to a budget.
    expect(thinking).toBeInstanceOf(Anthropic.BadRequestError);
    expect((thinking as Error).message).toContain("reasoning parser");
    const overBudget = await client.messages
      .create({
        model: DEFAULT_MODEL,
        max_tokens: 8,
        messages: question,
        thinking: { type: "enabled", budget_tokens: 1024 },
      })
      .catch((e: unknown) => e);
    expect(overBudget).toBeInstanceOf(Anthropic.BadRequestError);
    expect((overBudget as Error).message).toContain("thinking.budget_tokens");

    const badKey = new Anthropic({ baseURL: s.server.url, apiKey: "not-the-key", maxRetries: 0 });
    const denied = await badKey.messages
      .create({ model: DEFAULT_MODEL, max_tokens: 8, messages: question })
      .catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((denied as InstanceType<typeof Anthropic.AuthenticationError>).error).toMatchObject({
      type: "error",
      error: { type: "authentication_error" },
    });

    const unknownModel = await client.messages
      .create({ model: "no-such-model", max_tokens: 8, messages: question })
      .catch((e: unknown) => e);
    expect(unknownModel).toBeInstanceOf(Anthropic.NotFoundError);
  });

  it("writes a usage row per message, under the key", () => {
    const db = new DatabaseSync(s.dbPath, { readOnly: true });
    try {
      const rows = db
        .prepare("SELECT model, status, completion_tokens FROM usage WHERE model = ? AND status = 200")
        .all(DEFAULT_MODEL) as { completion_tokens: number }[];
      expect(rows.length).toBeGreaterThanOrEqual(4);
      expect(rows.some((r) => r.completion_tokens === 8)).toBe(true);
    } finally {
      db.close();
    }
  });

  it("tokenizes a prompt and chat messages, and detokenizes back (vLLM's shape)", async () => {
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${s.server.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const text = await post("/tokenize", { model: DEFAULT_MODEL, prompt: "Hello world" });
    expect(text.status).toBe(200);
    const tokens = text.body.tokens as number[];
    expect(text.body.count).toBe(tokens.length);
    expect(text.body.max_model_len).toBeGreaterThan(0);
    const back = await post("/detokenize", { model: DEFAULT_MODEL, tokens });
    expect(back.body.prompt).toBe("Hello world");

    const chat = await post("/tokenize", { model: DEFAULT_MODEL, messages: question });
    const chatIds = chat.body.tokens as number[];
    // The same conversation counted by the Messages route: one renderer, one tokenizer.
    const counted = await client.messages.countTokens({ model: DEFAULT_MODEL, messages: question });
    expect(counted.input_tokens).toBe(chatIds.length);
    const rendered = await post("/detokenize", { model: DEFAULT_MODEL, tokens: chatIds });
    expect(rendered.body.prompt).toContain(
      "<|im_start|>user\nWhat is the weather in Paris for 3 days?<|im_end|>",
    );
    expect(rendered.body.prompt).toMatch(/<\|im_start\|>assistant\n$/);

    const bad = await post("/detokenize", { model: DEFAULT_MODEL, tokens: [10_000_000] });
    expect(bad.status).toBe(400);
    expect((bad.body.error as { param: string }).param).toBe("tokens");
  });
});
