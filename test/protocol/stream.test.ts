/** The streamed chunks built from synthetic engine events. */
import { describe, expect, it } from "vitest";
import type { EngineEvent } from "../../src/core/types.ts";
import { unavailable } from "../../src/errors.ts";
import {
  type ChatCompletionChunk,
  ChatCompletionStreamer,
  type StreamFrame,
} from "../../src/protocol/stream.ts";
import { delta, done, finish, parse, promptEvent, tokenLogprob } from "./helpers.ts";

const ctx = { requestId: "abc", model: "served", created: 1700000000 };

function frames(overrides: Record<string, unknown>, events: EngineEvent[]): StreamFrame[] {
  const s = new ChatCompletionStreamer(parse({ stream: true, ...overrides }), ctx);
  const out = events.flatMap((e) => s.push(e));
  if (events.at(-1)?.type === "done") expect(s.finished).toBe(true);
  return out;
}

function chunks(overrides: Record<string, unknown>, events: EngineEvent[]): ChatCompletionChunk[] {
  return frames(overrides, events).map((f) => {
    if (f.type !== "chunk") throw new Error("unexpected error frame");
    return f.data;
  });
}

const head = { id: "chatcmpl-abc", object: "chat.completion.chunk", created: 1700000000, model: "served" };

describe("ChatCompletionStreamer", () => {
  it("one choice: role chunk, content chunks, finish chunk", () => {
    const out = chunks({}, [
      promptEvent([1, 2]),
      delta(0, "Hel", [5]),
      delta(0, "lo", [6]),
      finish(0, 2),
      done,
    ]);
    expect(out).toEqual([
      {
        ...head,
        choices: [
          { index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null },
        ],
      },
      {
        ...head,
        choices: [
          { index: 0, delta: { content: "Hel" }, logprobs: null, finish_reason: null, token_ids: null },
        ],
      },
      {
        ...head,
        choices: [
          { index: 0, delta: { content: "lo" }, logprobs: null, finish_reason: null, token_ids: null },
        ],
      },
      {
        ...head,
        choices: [
          { index: 0, delta: {}, logprobs: null, finish_reason: "stop", stop_reason: null, token_ids: null },
        ],
      },
    ]);
  });

  it("n=2: role chunks for both first, then chunks interleaved in arrival order, one choice each", () => {
    const out = chunks({ n: 2 }, [
      promptEvent([1]),
      delta(1, "b", [3]),
      delta(0, "a", [4]),
      finish(1, 1, "length"),
      delta(0, "c", [5]),
      finish(0, 2, "stop", "###"),
      done,
    ]);
    expect(
      out.map((c) => {
        const ch = c.choices[0]!;
        return [ch.index, ch.delta.role ?? ch.delta.content ?? ch.finish_reason, ch.stop_reason];
      }),
    ).toEqual([
      [0, "assistant", undefined],
      [1, "assistant", undefined],
      [1, "b", undefined],
      [0, "a", undefined],
      [1, "length", null],
      [0, "c", undefined],
      [0, "stop", "###"],
    ]);
    for (const c of out) expect(c.choices).toHaveLength(1);
    expect(new Set(out.map((c) => `${c.id}/${c.created}`)).size).toBe(1);
  });

  it("stop_reason values on finish chunks: token id, string, repetition_detected", () => {
    const out = chunks({ n: 3 }, [
      promptEvent([1]),
      finish(0, 1, "stop", 7),
      finish(1, 1, "stop", "END"),
      finish(2, 4, "repetition", "repetition_detected"),
      done,
    ]).slice(3);
    expect(out.map((c) => [c.choices[0]!.finish_reason, c.choices[0]!.stop_reason])).toEqual([
      ["stop", 7],
      ["stop", "END"],
      ["repetition", "repetition_detected"],
    ]);
  });

  it("include_usage: a final chunk with no choices and the usage", () => {
    const out = chunks({ n: 2, stream_options: { include_usage: true } }, [
      promptEvent([1, 2, 3], 1),
      delta(0, "a", [4]),
      delta(1, "b", [5]),
      delta(1, "c", [6]),
      finish(0, 1),
      finish(1, 2),
      done,
    ]);
    expect(out.at(-1)).toEqual({
      ...head,
      choices: [],
      usage: {
        prompt_tokens: 3,
        completion_tokens: 3,
        total_tokens: 6,
        prompt_tokens_details: { cached_tokens: 1 },
        completion_tokens_details: { reasoning_tokens: 0 },
      },
    });
    expect(out.slice(0, -1).every((c) => c.usage === undefined)).toBe(true);
  });

  it("continuous_usage_stats: usage on every chunk with that choice's tokens so far", () => {
    const out = chunks({ n: 2, stream_options: { include_usage: true, continuous_usage_stats: true } }, [
      promptEvent([1, 2]),
      delta(0, "a", [4]),
      delta(1, "b", [5]),
      delta(0, "c", [6]),
      finish(0, 2),
      finish(1, 1),
      done,
    ]);
    expect(
      out.map((c) => [c.choices[0]?.index ?? null, c.usage!.completion_tokens, c.usage!.total_tokens]),
    ).toEqual([
      [0, 0, 2],
      [1, 0, 2],
      [0, 1, 3],
      [1, 1, 3],
      [0, 2, 4],
      [0, 2, 4],
      [1, 1, 3],
      [null, 3, 5],
    ]);
  });

  it("continuous_usage_stats without include_usage adds nothing (vLLM)", () => {
    const out = chunks({ stream_options: { continuous_usage_stats: true } }, [
      promptEvent([1]),
      delta(0, "a", [2]),
      finish(0, 1),
      done,
    ]);
    expect(out.every((c) => c.usage === undefined)).toBe(true);
  });

  it("return_token_ids: prompt_token_ids only on the very first chunk, token_ids per content chunk", () => {
    const out = chunks({ n: 2, return_token_ids: true }, [
      promptEvent([1, 2, 3]),
      delta(0, "a", [4]),
      delta(1, "b", [5, 6]),
      finish(0, 1),
      finish(1, 2),
      done,
    ]);
    expect(out[0]!.prompt_token_ids).toEqual([1, 2, 3]);
    expect(out.slice(1).every((c) => c.prompt_token_ids === undefined)).toBe(true);
    expect(out.slice(2).map((c) => c.choices[0]!.token_ids)).toEqual([[4], [5, 6], [], []]);
  });

  it("logprobs ride on content chunks", () => {
    const out = chunks({ logprobs: true, top_logprobs: 1 }, [
      promptEvent([1]),
      delta(0, "x", [9], [tokenLogprob(9, "x", -0.25, [[9, "x", -0.25]])]),
      finish(0, 1),
      done,
    ]);
    expect(out[1]!.choices[0]!.logprobs).toEqual({
      content: [
        {
          token: "x",
          logprob: -0.25,
          bytes: [120],
          top_logprobs: [{ token: "x", logprob: -0.25, bytes: [120] }],
        },
      ],
    });
    expect(out[2]!.choices[0]!.logprobs).toBeNull();
  });

  it("a delta with neither text nor tokens sends nothing; one with tokens but no text does", () => {
    const out = chunks({}, [promptEvent([1]), delta(0, "", []), delta(0, "", [7]), finish(0, 1), done]);
    expect(out.map((c) => c.choices[0]!.delta)).toEqual([
      { role: "assistant", content: "" },
      { content: "" },
      {},
    ]);
  });

  it("echo: one chunk per choice with the last message after the role chunks", () => {
    const messages = [{ role: "assistant", content: "Once upon" }];
    const out = chunks({ n: 2, temperature: 1, messages, echo: true, add_generation_prompt: false }, [
      promptEvent([1]),
      delta(0, " a time", [2]),
      finish(0, 1),
      finish(1, 0),
      done,
    ]);
    expect(out.slice(0, 4).map((c) => [c.choices[0]!.index, c.choices[0]!.delta])).toEqual([
      [0, { role: "assistant", content: "" }],
      [1, { role: "assistant", content: "" }],
      [0, { content: "Once upon" }],
      [1, { content: "Once upon" }],
    ]);
    // Nothing to echo when the roles differ.
    expect(chunks({ echo: true }, [promptEvent([1]), finish(0, 0), done])).toHaveLength(2);
  });

  it("role follows the last message without a generation prompt", () => {
    const out = chunks({ add_generation_prompt: false }, [promptEvent([1]), finish(0, 0), done]);
    expect(out[0]!.choices[0]!.delta).toEqual({ role: "user", content: "" });
  });

  it("an engine error becomes an error frame and ends the stream", () => {
    const s = new ChatCompletionStreamer(parse({ stream: true }), ctx);
    s.push(promptEvent([1]));
    expect(s.producedChunks).toBe(true);
    const [f] = s.push({
      type: "error",
      code: "invalid_request",
      message: "bad ids",
      param: "stop_token_ids",
    });
    expect(f).toMatchObject({
      type: "error",
      data: { error: { message: "bad ids", type: "invalid_request_error", param: "stop_token_ids" } },
    });
    expect(f?.type === "error" && f.error.status).toBe(400);
    expect(s.finished).toBe(true);
    expect(s.push(delta(0, "late", [1]))).toEqual([]);
  });

  it("an error before any chunk leaves producedChunks false, so it can be a plain JSON error", () => {
    const s = new ChatCompletionStreamer(parse({ stream: true }), ctx);
    const out = s.push({ type: "error", code: "priority_not_supported", message: "fcfs" });
    expect(out.map((f) => f.type)).toEqual(["error"]);
    expect(s.producedChunks).toBe(false);
  });

  it("fail() turns a caught error into the final frame", () => {
    const s = new ChatCompletionStreamer(parse({ stream: true }), ctx);
    s.push(promptEvent([1]));
    const f = s.fail(unavailable("draining"));
    expect(f.data).toEqual({
      error: { message: "draining", type: "service_unavailable_error", param: null, code: "unavailable" },
    });
    expect(s.finished).toBe(true);
  });
});
