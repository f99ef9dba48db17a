/** Completion responses and chunks from engine events: choice indices, echo, legacy logprobs, usage. */
import { describe, expect, it } from "vitest";
import type { EngineEvent } from "../../src/core/types.ts";
import { parseCompletionRequest } from "../../src/protocol/completion-request.ts";
import { CompletionAccumulator } from "../../src/protocol/completion-response.ts";
import { type CompletionChunk, CompletionStreamer } from "../../src/protocol/completion-stream.ts";
import { delta, done, finish, tokenLogprob } from "./helpers.ts";

const ctx = { requestId: "r1", model: "m", created: 5 };
const req = (overrides: Record<string, unknown> = {}) =>
  parseCompletionRequest({ model: "m", prompt: "Hi there", ...overrides });

/** A prompt event with echo data: "Hi" " there" (ids 10, 11); the second token's logprob and one alternative. */
const echoPrompt: EngineEvent = {
  type: "prompt",
  promptTokenIds: [10, 11],
  cachedTokens: 1,
  queueMs: 0,
  promptLogprobs: [
    null,
    {
      entries: [
        { tokenId: 11, logprob: -2, rank: 3, token: " there" },
        { tokenId: 12, logprob: -0.5, rank: 1, token: "!" },
      ],
    },
  ],
  echo: { text: "Hi there", tokens: ["Hi", " there"] },
};

describe("CompletionAccumulator", () => {
  it("numbers choices prompt × n + i and sums usage over prompts", () => {
    const acc = new CompletionAccumulator(req({ prompt: ["a", "b"], n: 2, temperature: 1 }), ctx);
    const events: [number, EngineEvent][] = [
      [1, { type: "prompt", promptTokenIds: [1, 2, 3], cachedTokens: 2, queueMs: 0 }],
      [0, { type: "prompt", promptTokenIds: [4], cachedTokens: 0, queueMs: 0 }],
      [1, delta(1, "y", [7])],
      [0, delta(0, "x", [8])],
      [0, delta(1, "z", [9])],
      [1, delta(0, "w", [6])],
      [0, finish(0, 1)],
      [0, finish(1, 1, "length")],
      [1, finish(0, 1)],
      [1, finish(1, 1)],
      [0, done],
      [1, done],
    ];
    for (const [p, e] of events) acc.push(e, p);
    const r = acc.result();
    expect(r.id).toBe("cmpl-r1");
    expect(r.object).toBe("text_completion");
    expect(r.choices.map((c) => [c.index, c.text])).toEqual([
      [0, "x"],
      [1, "z"],
      [2, "w"],
      [3, "y"],
    ]);
    expect(r.choices[1]!.finish_reason).toBe("length");
    expect(r.usage).toEqual({
      prompt_tokens: 4,
      completion_tokens: 4,
      total_tokens: 8,
      prompt_tokens_details: { cached_tokens: 2 },
    });
  });

  it("waits for every prompt to be done", () => {
    const acc = new CompletionAccumulator(req({ prompt: ["a", "b"] }), ctx);
    acc.push({ type: "prompt", promptTokenIds: [1], cachedTokens: 0, queueMs: 0 }, 0);
    acc.push(finish(0, 0), 0);
    acc.push(done, 0);
    expect(() => acc.result()).toThrow(/before it finished/);
  });

  it("echo + logprobs: the prompt's tokens first (the first without a logprob), then the generated ones", () => {
    const acc = new CompletionAccumulator(req({ echo: true, logprobs: 1, max_tokens: 2 }), ctx);
    acc.push(echoPrompt, 0);
    acc.push(delta(0, " you", [13], [tokenLogprob(13, " you", -1, [[14, " me", -0.7]])]), 0);
    acc.push(delta(0, "é", [15], [tokenLogprob(15, "é", -3, [])]), 0);
    acc.push(finish(0, 2, "length"), 0);
    acc.push(done, 0);
    const c = acc.result().choices[0]!;
    expect(c.text).toBe("Hi there youé");
    expect(c.logprobs).toEqual({
      tokens: ["Hi", " there", " you", "é"],
      token_logprobs: [null, -2, -1, -3],
      top_logprobs: [null, { " there": -2, "!": -0.5 }, { " you": -1, " me": -0.7 }, { é: -3 }],
      text_offset: [0, 2, 8, 12],
    });
    expect(c.prompt_logprobs).toEqual([
      null,
      {
        "11": { logprob: -2, rank: 3, decoded_token: " there" },
        "12": { logprob: -0.5, rank: 1, decoded_token: "!" },
      },
    ]);
  });

  it("max_tokens 0 with echo: the prompt alone, finished by length, no completion tokens", () => {
    const acc = new CompletionAccumulator(req({ echo: true, logprobs: 0, max_tokens: 0 }), ctx);
    acc.push(echoPrompt, 0);
    acc.push(done, 0);
    const r = acc.result();
    expect(r.choices[0]).toMatchObject({ text: "Hi there", finish_reason: "length", stop_reason: null });
    // logprobs 0: each top map holds the token itself only.
    expect(r.choices[0]!.logprobs!.top_logprobs).toEqual([null, { " there": -2 }]);
    expect(r.usage.completion_tokens).toBe(0);
    expect(r.usage.prompt_tokens).toBe(2);
  });

  it("without logprobs there is no logprobs object; -inf is floored", () => {
    const acc = new CompletionAccumulator(req({ logprobs: 0 }), ctx);
    acc.push({ type: "prompt", promptTokenIds: [1], cachedTokens: 0, queueMs: 0 }, 0);
    acc.push(delta(0, "a", [2], [tokenLogprob(2, "a", Number.NEGATIVE_INFINITY)]), 0);
    acc.push(finish(0, 1), 0);
    acc.push(done, 0);
    expect(acc.result().choices[0]!.logprobs!.token_logprobs).toEqual([-9999]);
    const plain = new CompletionAccumulator(req(), ctx);
    plain.push({ type: "prompt", promptTokenIds: [1], cachedTokens: 0, queueMs: 0 }, 0);
    plain.push(finish(0, 0), 0);
    plain.push(done, 0);
    expect(plain.result().choices[0]!.logprobs).toBeNull();
  });

  it("an engine error event throws its ApiError", () => {
    const acc = new CompletionAccumulator(req(), ctx);
    expect(() => acc.push({ type: "error", code: "invalid_request", message: "bad", param: "x" }, 0)).toThrow(
      "bad",
    );
  });
});

describe("CompletionStreamer", () => {
  const chunks = (s: CompletionStreamer, events: [number, EngineEvent][]): CompletionChunk[] =>
    events.flatMap(([p, e]) => s.push(e, p)).map((f) => f.data as CompletionChunk);

  it("echo chunk, deltas with offsets continuing after the echo, finish, then usage", () => {
    const s = new CompletionStreamer(
      req({ echo: true, logprobs: 0, stream: true, stream_options: { include_usage: true } }),
      ctx,
    );
    const out = chunks(s, [
      [0, echoPrompt],
      [0, delta(0, " you", [13], [tokenLogprob(13, " you", -1)])],
      [0, finish(0, 1, "stop", "\n")],
      [0, done],
    ]);
    expect(out.map((c) => c.choices[0]?.text)).toEqual(["Hi there", " you", "", undefined]);
    expect(out[0]!.choices[0]!.logprobs!.text_offset).toEqual([0, 2]);
    expect(out[1]!.choices[0]!.logprobs).toEqual({
      tokens: [" you"],
      token_logprobs: [-1],
      top_logprobs: [{ " you": -1 }],
      text_offset: [8],
    });
    expect(out[2]!.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: "\n" });
    expect(out[3]).toMatchObject({
      object: "text_completion",
      choices: [],
      usage: { prompt_tokens: 2, completion_tokens: 1 },
    });
    expect(s.finished).toBe(true);
  });

  it("interleaves prompts with their own indices and ends after the last prompt", () => {
    const s = new CompletionStreamer(req({ prompt: [[1], [2]], stream: true, return_token_ids: true }), ctx);
    const out = chunks(s, [
      [1, { type: "prompt", promptTokenIds: [2], cachedTokens: 0, queueMs: 0 }],
      [0, { type: "prompt", promptTokenIds: [1], cachedTokens: 0, queueMs: 0 }],
      [1, delta(0, "b", [5])],
      [1, finish(0, 1)],
      [1, done],
    ]);
    expect(s.finished).toBe(false);
    expect(out.map((c) => c.choices[0]!.index)).toEqual([1, 1]);
    expect(out[0]!.choices[0]).toMatchObject({ text: "b", token_ids: [5], prompt_token_ids: [2] });
    expect(out[1]!.choices[0]!.prompt_token_ids).toBeUndefined();
    const rest = chunks(s, [
      [0, delta(0, "a", [4])],
      [0, finish(0, 1)],
      [0, done],
    ]);
    expect(rest.map((c) => c.choices[0]!.index)).toEqual([0, 0]);
    expect(s.finished).toBe(true);
  });

  it("scoring (max_tokens 0): the echo chunk then a length finish per choice", () => {
    const s = new CompletionStreamer(req({ echo: true, max_tokens: 0, stream: true }), ctx);
    const out = chunks(s, [
      [0, echoPrompt],
      [0, done],
    ]);
    expect(out.map((c) => [c.choices[0]!.text, c.choices[0]!.finish_reason])).toEqual([
      ["Hi there", null],
      ["", "length"],
    ]);
  });
});
