/**
 * Over raw HTTP: the exact shape of a chat completion and of its stream — ids, token ids, logprobs,
 * prompt logprobs, echo, n > 1 streams, per-chunk usage — and how errors surface before a stream
 * starts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addSyntheticModel,
  CONTEXT,
  chat,
  chatStream,
  expectApiError,
  type Harness,
  startHarness,
  tinyRequest,
} from "./harness.ts";

type Json = Record<string, unknown>;

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
}

interface Choice {
  index: number;
  message: Json & { role: string; content: string };
  logprobs: { content: LogprobEntry[] } | null;
  finish_reason: string;
  stop_reason: number | string | null;
  token_ids: number[] | null;
}

interface LogprobEntry {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

interface Completion {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: Choice[];
  usage: Usage;
  service_tier: null;
  system_fingerprint: null;
  prompt_logprobs: (Record<string, { logprob: number; rank: number; decoded_token: string }> | null)[] | null;
  prompt_token_ids: number[] | null;
  kv_transfer_params: Json | null;
}

interface Chunk {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: {
    index: number;
    delta: { role?: string; content?: string };
    logprobs: unknown;
    finish_reason: string | null;
    stop_reason?: unknown;
    token_ids?: number[] | null;
  }[];
  usage?: Usage;
  prompt_token_ids?: number[];
}

let h: Harness;

beforeAll(async () => {
  h = await startHarness(async (models) => {
    await addSyntheticModel(models, "tiny");
  });
});

afterAll(async () => {
  await h?.dispose();
});

const HEX_ID = /^[0-9a-f]{32}$/;

describe("non-streaming response", () => {
  it("has exactly the spec's fields, with the spec's types", async () => {
    const before = Math.floor(Date.now() / 1000);
    const r = await chat<Completion>(h, tinyRequest({ max_tokens: 2, kv_transfer_params: { k: "v" } }));
    const after = Math.floor(Date.now() / 1000);
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^application\/json/);
    const c = r.json;
    expect(Object.keys(c).sort()).toEqual(
      [
        "id",
        "object",
        "created",
        "model",
        "choices",
        "usage",
        "service_tier",
        "system_fingerprint",
        "prompt_logprobs",
        "prompt_token_ids",
        "kv_transfer_params",
      ].sort(),
    );
    expect(c.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    expect(c.object).toBe("chat.completion");
    expect(Number.isInteger(c.created)).toBe(true);
    expect(c.created).toBeGreaterThanOrEqual(before);
    expect(c.created).toBeLessThanOrEqual(after);
    expect(c.model).toBe("tiny");
    expect(c.service_tier).toBeNull();
    expect(c.system_fingerprint).toBeNull();
    expect(c.prompt_logprobs).toBeNull();
    expect(c.prompt_token_ids).toBeNull();
    expect(c.kv_transfer_params).toEqual({ k: "v" });

    expect(c.choices).toHaveLength(1);
    const choice = c.choices[0]!;
    expect(Object.keys(choice).sort()).toEqual(
      ["index", "message", "logprobs", "finish_reason", "stop_reason", "token_ids"].sort(),
    );
    expect(choice.index).toBe(0);
    expect(choice.logprobs).toBeNull();
    expect(choice.token_ids).toBeNull();
    expect(["stop", "length"]).toContain(choice.finish_reason);
    expect(Object.keys(choice.message).sort()).toEqual(
      [
        "role",
        "content",
        "refusal",
        "annotations",
        "audio",
        "function_call",
        "tool_calls",
        "reasoning",
      ].sort(),
    );
    expect(choice.message.role).toBe("assistant");
    expect(typeof choice.message.content).toBe("string");

    expect(Object.keys(c.usage).sort()).toEqual(
      [
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "prompt_tokens_details",
        "completion_tokens_details",
      ].sort(),
    );
    // A model without a reasoning parser has no think block.
    expect(c.usage.completion_tokens_details).toEqual({ reasoning_tokens: 0 });
    expect(Object.keys(c.usage.prompt_tokens_details!)).toEqual(["cached_tokens"]);
    expect(c.usage.total_tokens).toBe(c.usage.prompt_tokens + c.usage.completion_tokens);
    expect(c.usage.prompt_tokens_details!.cached_tokens).toBeLessThanOrEqual(c.usage.prompt_tokens);
  });

  it("finish_reason length with a null stop_reason when max_tokens cuts the reply", async () => {
    const r = await chat<Completion>(h, tinyRequest({ max_tokens: 3, ignore_eos: true }));
    expect(r.json.choices[0]!.finish_reason).toBe("length");
    expect(r.json.choices[0]!.stop_reason).toBeNull();
    expect(r.json.usage.completion_tokens).toBe(3);
  });

  it("finish_reason stop with the token id as stop_reason for a stop token", async () => {
    // allowed_token_ids leaves one choice, which is also a stop token: the first token stops.
    const r = await chat<Completion>(
      h,
      tinyRequest({ max_tokens: 4, allowed_token_ids: [70], stop_token_ids: [70], return_token_ids: true }),
    );
    const choice = r.json.choices[0]!;
    expect(choice.finish_reason).toBe("stop");
    expect(choice.stop_reason).toBe(70);
    expect(choice.token_ids).toEqual([70]);
  });

  it("finish_reason stop with the matched string as stop_reason for a stop string", async () => {
    // Only token 100 ("a") may be sampled, so the text is "aaaa…" and "aa" matches at the second token.
    const base = tinyRequest({ allowed_token_ids: [100], stop: ["zz", "aa"], max_tokens: 5 });
    const cut = await chat<Completion>(h, base);
    expect(cut.json.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: "aa" });
    expect(cut.json.choices[0]!.message.content).toBe("");
    const kept = await chat<Completion>(h, { ...base, include_stop_str_in_output: true });
    expect(kept.json.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: "aa" });
    expect(kept.json.choices[0]!.message.content).toBe("aa");
  });

  it('finish_reason repetition with stop_reason "repetition_detected"', async () => {
    const r = await chat<Completion>(
      h,
      tinyRequest({
        allowed_token_ids: [100],
        repetition_detection: { max_pattern_size: 1, min_count: 3 },
        max_tokens: 8,
      }),
    );
    expect(r.json.choices[0]).toMatchObject({
      finish_reason: "repetition",
      stop_reason: "repetition_detected",
    });
    expect(r.json.choices[0]!.message.content).toBe("aaa");
    expect(r.json.usage.completion_tokens).toBe(3);
  });

  it("the response id comes from request_id, and X-Request-Id wins over it", async () => {
    const fromBody = await chat<Completion>(h, tinyRequest({ request_id: "body-id-1" }));
    expect(fromBody.json.id).toBe("chatcmpl-body-id-1");

    const fromHeader = await chat<Completion>(h, tinyRequest(), { "X-Request-Id": "header-id-1" });
    expect(fromHeader.json.id).toBe("chatcmpl-header-id-1");
    expect(fromHeader.headers.get("x-request-id")).toBe("header-id-1");

    const both = await chat<Completion>(h, tinyRequest({ request_id: "body-id-2" }), {
      "X-Request-Id": "header-id-2",
    });
    expect(both.json.id).toBe("chatcmpl-header-id-2");
    expect(both.headers.get("x-request-id")).toBe("header-id-2");

    const neither = await chat<Completion>(h, tinyRequest());
    const generated = neither.json.id.replace(/^chatcmpl-/, "");
    expect(generated).toMatch(HEX_ID);
    expect(neither.headers.get("x-request-id")).toMatch(HEX_ID);
  });

  it("with only a body request_id, the X-Request-Id response header carries that id", async () => {
    // Known bug: the header (and the access log line) keep a generated id while the response id
    // and the usage record use the body's request_id.
    const r = await chat<Completion>(h, tinyRequest({ request_id: "body-id-3" }));
    expect(r.json.id).toBe("chatcmpl-body-id-3");
    expect(r.headers.get("x-request-id")).toBe("body-id-3");
  });

  it("every response carries an X-Request-Id header, errors too", async () => {
    const err = await chat(h, tinyRequest({ top_p: 5 }), { "X-Request-Id": "err-1" });
    expect(err.status).toBe(400);
    expect(err.headers.get("x-request-id")).toBe("err-1");
    const health = await fetch(`${h.url}/health`);
    expect(health.headers.get("x-request-id")).toMatch(HEX_ID);
  });

  it("return_token_ids: prompt_token_ids and per-choice token_ids match the usage counts", async () => {
    const r = await chat<Completion>(
      h,
      tinyRequest({ return_token_ids: true, max_tokens: 3, ignore_eos: true, n: 2, temperature: 1 }),
    );
    const c = r.json;
    expect(c.prompt_token_ids).toHaveLength(c.usage.prompt_tokens);
    for (const id of c.prompt_token_ids!) expect(Number.isInteger(id)).toBe(true);
    // The synthetic chat template starts with <|im_start|> (id 1).
    expect(c.prompt_token_ids![0]).toBe(1);
    for (const choice of c.choices) expect(choice.token_ids).toHaveLength(3);
    expect(c.usage.completion_tokens).toBe(6);
  });

  it("logprobs: one entry per token, top_logprobs sorted, bytes are the token's UTF-8", async () => {
    const r = await chat<Completion>(
      h,
      tinyRequest({
        logprobs: true,
        top_logprobs: 3,
        max_tokens: 3,
        ignore_eos: true,
        temperature: 1,
        // Byte tokens of "a".."e" (id = 3 + byte), so the text is exactly the tokens' bytes.
        allowed_token_ids: [100, 101, 102, 103, 104],
      }),
    );
    const choice = r.json.choices[0]!;
    const content = choice.logprobs!.content;
    expect(content).toHaveLength(3);
    for (const entry of content) {
      expect(Object.keys(entry).sort()).toEqual(["bytes", "logprob", "token", "top_logprobs"]);
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.top_logprobs).toHaveLength(3);
      const lps = entry.top_logprobs.map((t) => t.logprob);
      expect([...lps].sort((a, b) => b - a)).toEqual(lps);
      for (const t of entry.top_logprobs)
        expect(Object.keys(t).sort()).toEqual(["bytes", "logprob", "token"]);
      expect(entry.logprob).toBeLessThanOrEqual(entry.top_logprobs[0]!.logprob);
    }
    for (const entry of content) expect(Buffer.from(entry.bytes).toString("utf8")).toBe(entry.token);
    expect(choice.message.content).toBe(content.map((e) => e.token).join(""));
    expect(choice.message.content).toMatch(/^[a-e]{3}$/);
  });

  it("prompt_logprobs: aligned with the prompt, null first, each entry holding the actual token", async () => {
    const r = await chat<Completion>(h, tinyRequest({ prompt_logprobs: 2, return_token_ids: true }));
    const c = r.json;
    const ids = c.prompt_token_ids!;
    const pl = c.prompt_logprobs!;
    expect(pl).toHaveLength(ids.length);
    expect(pl[0]).toBeNull();
    for (let i = 1; i < pl.length; i++) {
      const entry = pl[i]!;
      expect(entry).not.toBeNull();
      expect(entry[String(ids[i])], `position ${i}`).toBeDefined();
      const n = Object.keys(entry).length;
      expect(n).toBeGreaterThanOrEqual(2);
      expect(n).toBeLessThanOrEqual(3);
      for (const [id, v] of Object.entries(entry)) {
        expect(id).toMatch(/^\d+$/);
        expect(Object.keys(v).sort()).toEqual(["decoded_token", "logprob", "rank"]);
        expect(v.logprob).toBeLessThanOrEqual(0);
        expect(v.rank).toBeGreaterThanOrEqual(1);
      }
    }
  });

  it("echo with continue_final_message: the reply starts with the message being continued", async () => {
    const r = await chat<Completion>(h, {
      model: "tiny",
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: "Once upon" },
      ],
      add_generation_prompt: false,
      continue_final_message: true,
      echo: true,
      max_tokens: 2,
    });
    expect(r.status, r.text).toBe(200);
    const choice = r.json.choices[0]!;
    expect(choice.message.role).toBe("assistant");
    expect(choice.message.content.startsWith("Once upon")).toBe(true);
  });

  it("echo with n=2: every choice starts with the echoed message", async () => {
    const r = await chat<Completion>(h, {
      model: "tiny",
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: "Hey" },
      ],
      add_generation_prompt: false,
      continue_final_message: true,
      echo: true,
      n: 2,
      temperature: 1,
      max_tokens: 1,
    });
    expect(r.json.choices).toHaveLength(2);
    for (const c of r.json.choices) expect(c.message.content.startsWith("Hey")).toBe(true);
  });

  it("echo without a matching last role adds nothing", async () => {
    const r = await chat<Completion>(h, tinyRequest({ echo: true, allowed_token_ids: [100], max_tokens: 2 }));
    expect(r.json.choices[0]!.message.content).toBe("aa");
  });

  it("without a generation prompt the reply takes the last message's role", async () => {
    const r = await chat<Completion>(h, tinyRequest({ add_generation_prompt: false }));
    expect(r.json.choices[0]!.message.role).toBe("user");
  });
});

describe("streaming", () => {
  it("chunks share id, created and model; a role chunk first, a finish chunk, then [DONE]", async () => {
    const s = await chatStream(h, tinyRequest({ max_tokens: 3, ignore_eos: true }));
    expect(s.done).toBe(true);
    const chunks = s.events as unknown as Chunk[];
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[0]!.id).toMatch(/^chatcmpl-/);
    expect(new Set(chunks.map((c) => c.created)).size).toBe(1);
    for (const c of chunks) {
      expect(c.object).toBe("chat.completion.chunk");
      expect(c.model).toBe("tiny");
      expect(c.choices).toHaveLength(1);
    }
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "" });
    const last = chunks.at(-1)!.choices[0]!;
    expect(last.finish_reason).toBe("length");
    expect(last.stop_reason).toBeNull();
    expect(chunks.filter((c) => c.choices[0]!.finish_reason !== null)).toHaveLength(1);
    expect(chunks.some((c) => "usage" in c)).toBe(false);
  });

  it("return_token_ids: prompt_token_ids only in the first chunk, token_ids deltas add up", async () => {
    const body = tinyRequest({ max_tokens: 4, ignore_eos: true, return_token_ids: true });
    const full = await chat<Completion>(h, { ...body, temperature: 0 });
    const s = await chatStream(h, { ...body, temperature: 0, stream_options: { include_usage: true } });
    const chunks = s.events as unknown as Chunk[];
    expect(chunks[0]!.prompt_token_ids).toEqual(full.json.prompt_token_ids);
    for (const c of chunks.slice(1)) expect(c).not.toHaveProperty("prompt_token_ids");
    const deltas = chunks.flatMap((c) => c.choices[0]?.token_ids ?? []);
    expect(deltas).toEqual(full.json.choices[0]!.token_ids);
    expect(deltas).toHaveLength(4);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text).toBe(full.json.choices[0]!.message.content);
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toMatchObject({ prompt_tokens: full.json.usage.prompt_tokens, completion_tokens: 4 });
  });

  it("n=2: one choice per chunk, both choices interleaved, a role and a finish chunk each", async () => {
    const s = await chatStream(
      h,
      tinyRequest({ n: 2, temperature: 1, seed: 7, max_tokens: 6, ignore_eos: true }),
    );
    const chunks = s.events as unknown as Chunk[];
    for (const c of chunks) expect(c.choices).toHaveLength(1);
    const indices = chunks.map((c) => c.choices[0]!.index);
    expect(new Set(indices)).toEqual(new Set([0, 1]));
    // Role chunks for both choices come first.
    expect(chunks.slice(0, 2).map((c) => c.choices[0]!.delta.role)).toEqual(["assistant", "assistant"]);
    expect(indices.slice(0, 2)).toEqual([0, 1]);
    // Content of the two choices interleaves: choice 1 speaks before choice 0 has finished.
    const content = chunks.slice(2).filter((c) => c.choices[0]!.finish_reason === null);
    const firstOf1 = content.findIndex((c) => c.choices[0]!.index === 1);
    const lastOf0 = content.findLastIndex((c) => c.choices[0]!.index === 0);
    expect(firstOf1).toBeGreaterThanOrEqual(0);
    expect(firstOf1).toBeLessThan(lastOf0);
    for (const i of [0, 1]) {
      const finishes = chunks.filter(
        (c) => c.choices[0]!.index === i && c.choices[0]!.finish_reason !== null,
      );
      expect(finishes).toHaveLength(1);
      expect(finishes[0]!.choices[0]!.finish_reason).toBe("length");
    }
  });

  it("continuous_usage_stats: usage on every chunk, growing per choice, then the usage chunk", async () => {
    const s = await chatStream(
      h,
      tinyRequest({
        n: 2,
        temperature: 1,
        max_tokens: 3,
        ignore_eos: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      }),
    );
    const chunks = s.events as unknown as Chunk[];
    const final = chunks.at(-1)!;
    expect(final.choices).toEqual([]);
    expect(final.usage!.completion_tokens).toBe(6);
    const prompt = final.usage!.prompt_tokens;
    const seen = [0, 0];
    for (const c of chunks.slice(0, -1)) {
      expect(c.usage, JSON.stringify(c)).toBeDefined();
      const u = c.usage!;
      expect(u.prompt_tokens).toBe(prompt);
      expect(u.total_tokens).toBe(u.prompt_tokens + u.completion_tokens);
      const i = c.choices[0]!.index;
      expect(u.completion_tokens).toBeGreaterThanOrEqual(seen[i]!);
      seen[i] = u.completion_tokens;
    }
    expect(seen).toEqual([3, 3]);
  });

  it("include_usage alone: only the final chunk carries usage", async () => {
    const s = await chatStream(h, tinyRequest({ max_tokens: 2, stream_options: { include_usage: true } }));
    const chunks = s.events as unknown as Chunk[];
    expect(chunks.filter((c) => c.usage !== undefined)).toHaveLength(1);
    expect(chunks.at(-1)!.usage!.total_tokens).toBeGreaterThan(0);
  });

  it("echo: one extra chunk with the continued message after the role chunk", async () => {
    const s = await chatStream(h, {
      model: "tiny",
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: "Once upon" },
      ],
      add_generation_prompt: false,
      continue_final_message: true,
      echo: true,
      max_tokens: 2,
    });
    const chunks = s.events as unknown as Chunk[];
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(chunks[1]!.choices[0]!.delta).toEqual({ content: "Once upon" });
  });

  it("logprobs in chunks: one entry per token of the chunk", async () => {
    const s = await chatStream(
      h,
      tinyRequest({
        logprobs: true,
        top_logprobs: 2,
        max_tokens: 3,
        ignore_eos: true,
        return_token_ids: true,
      }),
    );
    const chunks = s.events as unknown as Chunk[];
    let entries = 0;
    for (const c of chunks.slice(1)) {
      const choice = c.choices[0]!;
      if (choice.finish_reason !== null) continue;
      const lp = choice.logprobs as { content: LogprobEntry[] };
      expect(lp.content).toHaveLength(choice.token_ids!.length);
      entries += lp.content.length;
    }
    expect(entries).toBe(3);
  });

  it("an error found before the stream starts is a plain JSON error with its real status", async () => {
    const cases: { body: Json; status: number; param: string | null }[] = [
      { body: tinyRequest({ model: "nope" }), status: 404, param: "model" },
      { body: tinyRequest({ top_p: 0 }), status: 400, param: "top_p" },
      { body: tinyRequest({ n: 2, temperature: 0 }), status: 400, param: "n" },
      { body: tinyRequest({ priority: 1 }), status: 400, param: "priority" },
      { body: tinyRequest({ max_tokens: CONTEXT }), status: 400, param: "max_tokens" },
      { body: tinyRequest({ logit_bias: { "100000": 1 } }), status: 400, param: "logit_bias" },
    ];
    for (const c of cases) {
      const r = await chat(h, { ...c.body, stream: true });
      expect(r.status, JSON.stringify(c.body)).toBe(c.status);
      expect(r.headers.get("content-type")).not.toMatch(/event-stream/);
      expectApiError(r, c.status, { param: c.param });
    }
  });
});
