/**
 * Structured outputs end to end: a real server process and the real default model, driven by the
 * official `openai` client — response_format json_schema and structured_outputs, streaming and
 * not, n > 1 — and refusals as the client's BadRequestError.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type DefaultModelServer,
  haveDefaultModel,
  DEFAULT_MODEL as MODEL,
  startDefaultModelServer,
} from "./server-process.ts";

const KEY = "e2e-structured-key-0123456789";

const SCHEMA = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 20 },
    population: { type: "integer", minimum: 0 },
    capital: { type: "boolean" },
  },
  required: ["city", "population", "capital"],
};

describe.skipIf(!haveDefaultModel)("structured outputs through the OpenAI client", () => {
  let served: DefaultModelServer;
  let client: OpenAI;
  const validate = new Ajv2020({ strict: false }).compile(SCHEMA);

  beforeAll(async () => {
    served = await startDefaultModelServer({ prefix: "ortserve-e2e-structured-", apiKey: KEY });
    client = served.client;
  });

  afterAll(async () => {
    await served?.close();
  });

  const messages = [
    { role: "user" as const, content: "Describe Paris as JSON with city, population, capital." },
  ];
  const expectValid = (text: string, finish: string | null) => {
    if (finish === "length") return;
    expect(finish).toBe("stop");
    expect(validate(JSON.parse(text)), text).toBe(true);
  };

  /** A stream's first choice: its joined content, finish reason and the usage's completion tokens. */
  async function joined(stream: AsyncIterable<OpenAI.ChatCompletionChunk>) {
    let text = "";
    let finish: string | null = null;
    let completionTokens = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      completionTokens = chunk.usage?.completion_tokens ?? completionTokens;
    }
    return { text, finish, completionTokens };
  }

  it("response_format json_schema, n = 2: every choice validates", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages,
      n: 2,
      temperature: 1,
      max_completion_tokens: 80,
      response_format: { type: "json_schema", json_schema: { name: "city", schema: SCHEMA, strict: true } },
    });
    expect(r.choices).toHaveLength(2);
    for (const c of r.choices) expectValid(c.message.content!, c.finish_reason);
  });

  it("response_format json_schema, streamed: the joined deltas validate", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      temperature: 1,
      max_completion_tokens: 80,
      stream: true,
      response_format: { type: "json_schema", json_schema: { name: "city", schema: SCHEMA } },
    });
    const { text, finish } = await joined(stream);
    expectValid(text, finish);
  });

  it("jump-forward: forced keys stream as deltas, count in usage and in /metrics", async () => {
    const jumped = async () => {
      const text = await (await fetch(`${served.server.url}/metrics`)).text();
      return [...text.matchAll(/^ortserve_jump_forward_tokens_total\{[^}]*\} (\d+)$/gm)].reduce(
        (sum, m) => sum + Number(m[1]),
        0,
      );
    };
    const before = await jumped();
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      temperature: 1,
      // Seeded: an unseeded sample may take a path whose forced runs are all too short to jump
      // (one run in CI did), and the count below would stay put.
      seed: 11,
      max_completion_tokens: 80,
      stream: true,
      stream_options: { include_usage: true },
      // Compact JSON: with any whitespace allowed, little is forced (a key's closing quote may be
      // followed by spaces or the colon). Closed objects: an open one may take any extra name.
      structured_outputs: { json: SCHEMA, disable_any_whitespace: true, disable_additional_properties: true },
    } as unknown as OpenAI.ChatCompletionCreateParamsStreaming);
    const { text, finish, completionTokens } = await joined(stream);
    expectValid(text, finish);
    expect(completionTokens).toBeGreaterThan(0);
    expect(completionTokens).toBeLessThanOrEqual(80);
    expect(await jumped()).toBeGreaterThan(before);
  });

  it("structured_outputs json (compact) and choice, streamed with n = 3", async () => {
    const json = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_completion_tokens: 80,
      temperature: 1,
      // vLLM's extra field, sent as part of the body.
      structured_outputs: { json: SCHEMA, disable_any_whitespace: true },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const c = json.choices[0]!;
    expectValid(c.message.content!, c.finish_reason);
    // Compact JSON: no whitespace between tokens (string values may hold spaces of their own).
    if (c.finish_reason === "stop") expect(outsideStrings(c.message.content!)).not.toMatch(/\s/);

    const choices = ["positive", "negative", "neutral"];
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Sentiment of: I love this!" }],
      n: 3,
      temperature: 1,
      stream: true,
      structured_outputs: { choice: choices },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const texts = ["", "", ""];
    for await (const chunk of stream)
      for (const ch of chunk.choices) texts[ch.index] += ch.delta.content ?? "";
    for (const t of texts) expect(choices).toContain(t);
  });

  it("refusals are BadRequestErrors naming the feature", async () => {
    const refused = client.chat.completions.create({
      model: MODEL,
      messages,
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "x",
          schema: { type: "object", propertyNames: { pattern: "^a" } },
        },
      },
    });
    await expect(refused).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    await expect(refused).rejects.toMatchObject({ param: "response_format.json_schema.schema" });
    await expect(refused).rejects.toThrow(/propertyNames/);
    const two = client.chat.completions.create({
      model: MODEL,
      messages,
      response_format: { type: "json_object" },
      structured_outputs: { regex: "a+" },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    await expect(two).rejects.toThrow(/at most one/);
  });
});

/** The JSON text with every string literal emptied, so only the structure's own characters remain. */
function outsideStrings(json: string): string {
  return json.replace(/"(?:[^"\\]|\\.)*"/g, '""');
}
