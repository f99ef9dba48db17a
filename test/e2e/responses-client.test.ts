/**
 * The OpenAI Responses API end to end: a real server process on the default model, driven by the
 * official `openai` client, unmodified — plain and streamed responses, a function tool round trip
 * with function_call_output, text.format json_schema checked with Ajv (compact on a model whose
 * ortserve.json asks for compact JSON), stored responses (retrieve, delete, previous_response_id,
 * store: false, another key's), and OpenAI's error shapes.
 */
import { DatabaseSync } from "node:sqlite";
import { Ajv2020 } from "ajv/dist/2020.js";
import OpenAI from "openai";
import type { ResponseFunctionToolCall, ResponseStreamEvent } from "openai/resources/responses/responses";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys } from "../../src/storage/api-keys.ts";
import {
  DEFAULT_MODEL,
  type DefaultModelServer,
  haveDefaultModel,
  startDefaultModelServer,
} from "./server-process.ts";

const KEY = "e2e-responses-key-0123456789";
const WEATHER = {
  type: "object",
  properties: { city: { type: "string", maxLength: 24 }, days: { type: "integer", minimum: 1 } },
  required: ["city", "days"],
  additionalProperties: false,
};
const tools: OpenAI.Responses.FunctionTool[] = [
  {
    type: "function",
    name: "get_weather",
    description: "Weather forecast",
    parameters: WEATHER,
    strict: true,
  },
];
const question = "What is the weather in Paris for 3 days?";
/** The default model's weights under a model default of compact JSON (its ortserve.json). */
const COMPACT_MODEL = `${DEFAULT_MODEL}-compact`;

/** The JSON text's characters outside its strings (where whitespace may be). */
function outsideStrings(json: string): string {
  let out = "";
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const ch = json[i]!;
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else out += ch;
  }
  return out;
}

describe.skipIf(!haveDefaultModel)("OpenAI client's Responses API against a real ortserve process", () => {
  let s: DefaultModelServer;
  let client: OpenAI;

  beforeAll(async () => {
    s = await startDefaultModelServer({
      prefix: "ortserve-e2e-responses-",
      apiKey: KEY,
      variants: { [COMPACT_MODEL]: { structured_outputs: { disable_any_whitespace: true } } },
    });
    client = new OpenAI({ baseURL: `${s.server.url}/v1`, apiKey: KEY, maxRetries: 0 });
  });

  afterAll(async () => {
    await s?.close();
  });

  it("creates a response, incomplete when max_output_tokens ends it", async () => {
    const r = await client.responses.create({
      model: DEFAULT_MODEL,
      instructions: "You are terse.",
      input: "Count from one to twenty in words.",
      max_output_tokens: 8,
      temperature: 0,
      metadata: { run: "e2e" },
    });
    expect(r.object).toBe("response");
    expect(r.id).toMatch(/^resp_[0-9a-f]{48}$/);
    expect(r.model).toBe(DEFAULT_MODEL);
    expect(r.status).toBe("incomplete");
    expect(r.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(r.output).toHaveLength(1);
    const message = r.output[0] as OpenAI.Responses.ResponseOutputMessage;
    expect(message.type).toBe("message");
    expect(message.id).toMatch(/^msg_/);
    expect(message.role).toBe("assistant");
    expect(message.content[0]).toMatchObject({ type: "output_text", annotations: [] });
    // output_text is the SDK's own convenience, assembled from the output items.
    expect(r.output_text.length).toBeGreaterThan(0);
    expect(r.output_text).toBe((message.content[0] as OpenAI.Responses.ResponseOutputText).text);
    expect(r.usage?.output_tokens).toBe(8);
    expect(r.usage?.input_tokens).toBeGreaterThan(10);
    expect(r.usage?.total_tokens).toBe((r.usage?.input_tokens ?? 0) + 8);
    expect(r.usage?.output_tokens_details.reasoning_tokens).toBe(0);
    expect(r.instructions).toBe("You are terse.");
    expect(r.metadata).toEqual({ run: "e2e" });
    expect(r.max_output_tokens).toBe(8);
  });

  it("streams the Responses event sequence, ending in the response the plain call gives", async () => {
    const params = {
      model: DEFAULT_MODEL,
      input: "Name three colours.",
      max_output_tokens: 16,
      temperature: 0,
    };
    const plain = await client.responses.create({ ...params, store: false });
    const stream = await client.responses.create({ ...params, store: false, stream: true });
    const events: ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    expect(types).toContain("response.output_text.delta");
    const final = events.at(-1)!;
    expect(["response.completed", "response.incomplete"]).toContain(final.type);
    expect(types.slice(-4, -1)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events
      .filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === "response.output_text.delta")
      .map((e) => e.delta)
      .join("");
    expect(deltas).toBe(plain.output_text);
    const response = (final as OpenAI.Responses.ResponseCompletedEvent).response;
    expect(response.status).toBe(plain.status);
    expect(response.usage?.output_tokens).toBe(plain.usage?.output_tokens);
    const text = (response.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0];
    expect((text as OpenAI.Responses.ResponseOutputText).text).toBe(plain.output_text);
  });

  it("returns each output token's logprob with include message.output_text.logprobs, streamed and not", async () => {
    const params = {
      model: DEFAULT_MODEL,
      input: "Name a colour.",
      max_output_tokens: 6,
      temperature: 0,
      store: false,
      include: ["message.output_text.logprobs" as const],
      top_logprobs: 2,
    };
    const r = await client.responses.create(params);
    const text = (r.output[0] as OpenAI.Responses.ResponseOutputMessage)
      .content[0] as OpenAI.Responses.ResponseOutputText;
    expect(r.top_logprobs).toBe(2);
    expect(text.logprobs).toHaveLength(r.usage!.output_tokens);
    expect(text.logprobs!.map((l) => l.token).join("")).toBe(text.text);
    for (const l of text.logprobs!) {
      expect(l.logprob).toBeLessThanOrEqual(0);
      expect(l.top_logprobs).toHaveLength(2);
      // Greedy: the chosen token is the likeliest.
      expect(l.logprob).toBeCloseTo(Math.max(...l.top_logprobs.map((t) => t.logprob)), 4);
    }
    const stream = await client.responses.create({ ...params, stream: true });
    const streamed: OpenAI.Responses.ResponseTextDeltaEvent.Logprob[] = [];
    for await (const e of stream) if (e.type === "response.output_text.delta") streamed.push(...e.logprobs);
    expect(streamed.map((l) => [l.token, l.logprob])).toEqual(
      text.logprobs!.map((l) => [l.token, l.logprob]),
    );
  });

  it("runs a function tool round trip: a forced call, then its function_call_output answered", async () => {
    const validate = new Ajv2020({ strict: false }).compile(WEATHER);
    for (const tool_choice of ["required", { type: "function", name: "get_weather" }] as const) {
      const r = await client.responses.create({
        model: DEFAULT_MODEL,
        input: question,
        tools,
        tool_choice,
        parallel_tool_calls: false,
        temperature: 0,
        max_output_tokens: 64,
        store: false,
      });
      expect(r.status).toBe("completed");
      const call = r.output.find((o) => o.type === "function_call") as ResponseFunctionToolCall;
      expect(call.name).toBe("get_weather");
      expect(call.call_id).toMatch(/^call_/);
      expect(call.id).toMatch(/^fc_/);
      expect(validate(JSON.parse(call.arguments)), call.arguments).toBe(true);

      // Stateless, as Codex sends it: the whole conversation again, with the call's output.
      const answer = await client.responses.create({
        model: DEFAULT_MODEL,
        input: [
          { role: "user", content: question },
          ...(r.output as OpenAI.Responses.ResponseInputItem[]),
          { type: "function_call_output", call_id: call.call_id, output: "Sunny, 24 degrees." },
        ],
        tools,
        tool_choice: "none",
        temperature: 0,
        max_output_tokens: 24,
        store: false,
      });
      expect(answer.output.every((o) => o.type === "message")).toBe(true);
      expect(answer.output_text.length).toBeGreaterThan(0);
      expect(answer.usage!.input_tokens).toBeGreaterThan(r.usage!.input_tokens);
    }
  });

  it("streams a forced call as function_call_arguments deltas", async () => {
    const stream = await client.responses.create({
      model: DEFAULT_MODEL,
      input: question,
      tools,
      tool_choice: { type: "function", name: "get_weather" },
      temperature: 0,
      max_output_tokens: 64,
      stream: true,
      store: false,
    });
    let args = "";
    let done: OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent | undefined;
    let final: OpenAI.Responses.Response | undefined;
    for await (const e of stream) {
      if (e.type === "response.function_call_arguments.delta") args += e.delta;
      if (e.type === "response.function_call_arguments.done") done = e;
      if (e.type === "response.completed") final = e.response;
    }
    expect(args.length).toBeGreaterThan(0);
    expect(done?.arguments).toBe(args);
    const call = final!.output.find((o) => o.type === "function_call") as ResponseFunctionToolCall;
    expect(call.arguments).toBe(args);
    expect(new Ajv2020({ strict: false }).compile(WEATHER)(JSON.parse(args))).toBe(true);
  });

  it("answers in the text.format json_schema's language", async () => {
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 20 },
        age: { type: "integer", minimum: 0, maximum: 120 },
      },
      required: ["name", "age"],
      additionalProperties: false,
    };
    const r = await client.responses.create({
      model: DEFAULT_MODEL,
      input: "Describe a person as JSON.",
      text: { format: { type: "json_schema", name: "person", schema, strict: true } },
      temperature: 0,
      max_output_tokens: 64,
      store: false,
    });
    expect(r.status).toBe("completed");
    expect(r.text?.format).toMatchObject({ type: "json_schema", name: "person" });
    const validate = new Ajv2020({ strict: false }).compile(schema);
    expect(validate(JSON.parse(r.output_text)), r.output_text).toBe(true);
  });

  it("writes compact JSON on a model whose ortserve.json asks for it; a chat request's own option wins", async () => {
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 20 },
        age: { type: "integer", minimum: 0, maximum: 120 },
        pets: { type: "array", items: { type: "string", maxLength: 12 }, maxItems: 3 },
      },
      required: ["name", "age", "pets"],
      additionalProperties: false,
    };
    const validate = new Ajv2020({ strict: false }).compile(schema);
    const respond = async (model: string) => {
      const r = await client.responses.create({
        model,
        input: "Describe a person and their pets as JSON.",
        text: { format: { type: "json_schema", name: "person", schema, strict: true } },
        temperature: 0,
        max_output_tokens: 96,
        store: false,
      });
      expect(r.status, r.output_text).toBe("completed");
      expect(validate(JSON.parse(r.output_text)), r.output_text).toBe(true);
      return r.output_text;
    };
    const compact = await respond(COMPACT_MODEL);
    expect(outsideStrings(compact), compact).not.toMatch(/\s/);
    const free = await respond(DEFAULT_MODEL);

    // The same weights, greedy: the chat route's explicit option picks either grammar on either model.
    const chat = async (model: string, disable_any_whitespace?: boolean) => {
      const c = await s.client.chat.completions.create({
        model,
        messages: [{ role: "user", content: "Describe a person and their pets as JSON." }],
        temperature: 0,
        max_tokens: 96,
        ...({ structured_outputs: { json: schema, disable_any_whitespace } } as object),
      });
      return c.choices[0]!.message.content!;
    };
    const compactChat = await chat(COMPACT_MODEL);
    expect(outsideStrings(compactChat), compactChat).not.toMatch(/\s/);
    expect(await chat(DEFAULT_MODEL, true)).toBe(compactChat);
    const freeChat = await chat(DEFAULT_MODEL);
    expect(await chat(COMPACT_MODEL, false)).toBe(freeChat);
    // Left free, this model writes whitespace between the tokens: the default is what removed it.
    expect(outsideStrings(freeChat) + outsideStrings(free)).toMatch(/\s/);
  });

  it("stores responses: retrieve, previous_response_id, delete; store: false keeps nothing", async () => {
    const first = await client.responses.create({
      model: DEFAULT_MODEL,
      input: "My name is Ada. Say hello.",
      max_output_tokens: 12,
      temperature: 0,
    });
    // OpenAI returns store with the response; the SDK's type leaves it out.
    expect((first as unknown as { store: boolean }).store).toBe(true);
    const got = await client.responses.retrieve(first.id);
    expect(got.id).toBe(first.id);
    expect(got.output).toEqual(first.output);
    expect(got.usage).toEqual(first.usage);

    // The stored conversation comes first: the prompt is longer than the new input alone by it.
    const alone = await client.responses.create({
      model: DEFAULT_MODEL,
      input: "What is my name?",
      max_output_tokens: 4,
      store: false,
    });
    const next = await client.responses.create({
      model: DEFAULT_MODEL,
      previous_response_id: first.id,
      input: "What is my name?",
      max_output_tokens: 4,
    });
    expect(next.previous_response_id).toBe(first.id);
    expect(next.usage!.input_tokens).toBeGreaterThan(alone.usage!.input_tokens + first.usage!.output_tokens);
    // A chain: the third turn carries both before it.
    const third = await client.responses.create({
      model: DEFAULT_MODEL,
      previous_response_id: next.id,
      input: "Thanks.",
      max_output_tokens: 2,
      store: false,
    });
    expect(third.usage!.input_tokens).toBeGreaterThan(next.usage!.input_tokens);

    // The SDK's inputItems.list pages through the stored conversation, newest first.
    const items = [];
    for await (const item of client.responses.inputItems.list(next.id, { limit: 1 })) items.push(item);
    expect(items.map((i) => (i as { role?: string }).role)).toEqual(["user", "assistant", "user"]);
    expect(items[1]!.id).toBe(first.output[0]!.id);
    const asc = await client.responses.inputItems.list(next.id, { order: "asc" });
    expect(asc.data.map((i) => i.id)).toEqual(items.map((i) => i.id).reverse());
    expect(asc.data[0]).toMatchObject({
      type: "message",
      role: "user",
      content: [{ type: "input_text", text: "My name is Ada. Say hello." }],
    });

    // store: false keeps nothing: neither retrievable nor a previous response.
    await expect(client.responses.retrieve(third.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const missing = await client.responses
      .create({ model: DEFAULT_MODEL, previous_response_id: third.id, input: "Hi", max_output_tokens: 2 })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.BadRequestError);
    expect((missing as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("previous_response_not_found");
    expect((missing as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("previous_response_id");

    // Another key sees none of this key's responses.
    const db = new DatabaseSync(s.dbPath);
    const other = new ApiKeys(db).createKey("other");
    db.close();
    const otherClient = new OpenAI({ baseURL: `${s.server.url}/v1`, apiKey: other.key, maxRetries: 0 });
    await expect(otherClient.responses.retrieve(first.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(otherClient.responses.delete(first.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);

    await client.responses.delete(first.id);
    await expect(client.responses.retrieve(first.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.responses.delete(first.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    // The streamed kind is stored too, once complete.
    const stream = await client.responses.create({
      model: DEFAULT_MODEL,
      input: "Hi",
      max_output_tokens: 4,
      stream: true,
    });
    let id = "";
    for await (const e of stream) if (e.type === "response.created") id = e.response.id;
    expect((await client.responses.retrieve(id)).output.length).toBe(1);
  });

  it("refuses what it cannot honour in OpenAI's error shape, naming the field", async () => {
    const refused = async (body: object, param: string) => {
      const err = await client.responses
        .create({
          model: DEFAULT_MODEL,
          input: "Hi",
          ...body,
        } as OpenAI.Responses.ResponseCreateParamsNonStreaming)
        .catch((e: unknown) => e);
      expect(err, JSON.stringify(body)).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
      expect((err as Error).message).toContain(param);
    };
    await refused({ tools: [{ type: "web_search" }] }, "tools[0].type");
    await refused({ reasoning: { effort: "high" } }, "reasoning.effort");
    await refused({ truncation: "middle" as "auto" }, "truncation");
    await refused(
      { input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] },
      "input[0].content[0].type",
    );
    await refused({ tools, include: ["message.output_text.logprobs"] }, "include[0]");
    await refused({ frequency_penalty: 1 }, "frequency_penalty");
    await refused({ tool_choice: "required" }, "tool_choice");

    const unknownModel = await client.responses
      .create({ model: "no-such-model", input: "Hi" })
      .catch((e: unknown) => e);
    expect(unknownModel).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("writes a usage row per response, under the key", () => {
    const db = new DatabaseSync(s.dbPath, { readOnly: true });
    try {
      const rows = db
        .prepare("SELECT completion_tokens FROM usage WHERE model = ? AND status = 200")
        .all(DEFAULT_MODEL) as { completion_tokens: number }[];
      expect(rows.length).toBeGreaterThanOrEqual(10);
      expect(rows.some((r) => r.completion_tokens === 8)).toBe(true);
      const stored = db.prepare("SELECT count(*) AS n FROM responses").get() as { n: number };
      expect(stored.n).toBeGreaterThanOrEqual(2);
    } finally {
      db.close();
    }
  });
});
