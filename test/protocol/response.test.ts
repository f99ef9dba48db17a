/** The non-streaming response built from synthetic engine events. */
import { describe, expect, it } from "vitest";
import type { EngineEvent } from "../../src/core/types.ts";
import { ApiError, engineErrorToApiError } from "../../src/errors.ts";
import { ChatCompletionAccumulator } from "../../src/protocol/response.ts";
import { apiError, delta, done, finish, parse, promptEvent, tokenLogprob } from "./helpers.ts";

const ctx = { requestId: "abc", model: "served-name", created: 1700000000 };

function run(overrides: Record<string, unknown>, events: EngineEvent[]) {
  const acc = new ChatCompletionAccumulator(parse(overrides), ctx);
  for (const e of events) acc.push(e);
  return acc.result();
}

describe("ChatCompletionAccumulator", () => {
  it("builds vLLM's response for one choice", () => {
    const r = run({}, [
      promptEvent([1, 2, 3], 2),
      delta(0, "Hel", [10]),
      delta(0, "lo", [11]),
      finish(0, 2, "stop", null),
      done,
    ]);
    expect(r).toEqual({
      id: "chatcmpl-abc",
      object: "chat.completion",
      created: 1700000000,
      model: "served-name",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: "Hello",
            refusal: null,
            annotations: null,
            audio: null,
            function_call: null,
            tool_calls: [],
            reasoning: null,
          },
          logprobs: null,
          finish_reason: "stop",
          stop_reason: null,
          token_ids: null,
        },
      ],
      service_tier: null,
      system_fingerprint: null,
      usage: {
        prompt_tokens: 3,
        completion_tokens: 2,
        total_tokens: 5,
        prompt_tokens_details: { cached_tokens: 2 },
        completion_tokens_details: { reasoning_tokens: 0 },
      },
      prompt_logprobs: null,
      prompt_token_ids: null,
      kv_transfer_params: null,
    });
    expect(Object.keys(r)).toEqual([
      "id",
      "object",
      "created",
      "model",
      "choices",
      "service_tier",
      "system_fingerprint",
      "usage",
      "prompt_logprobs",
      "prompt_token_ids",
      "kv_transfer_params",
    ]);
  });

  it("n=2 interleaved: choices in index order, usage sums completion tokens", () => {
    const r = run({ n: 2 }, [
      promptEvent([1, 2]),
      delta(1, "B1", [5]),
      delta(0, "A1", [6]),
      delta(1, "B2", [7]),
      finish(1, 2, "length"),
      delta(0, "A2", [8]),
      delta(0, "A3", [9]),
      finish(0, 3, "stop", "A3"),
      done,
    ]);
    expect(r.choices.map((c) => [c.index, c.message.content, c.finish_reason, c.stop_reason])).toEqual([
      [0, "A1A2A3", "stop", "A3"],
      [1, "B1B2", "length", null],
    ]);
    expect(r.usage).toEqual({
      prompt_tokens: 2,
      completion_tokens: 5,
      total_tokens: 7,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    });
  });

  it("stop_reason carries a stop token id, a stop string or repetition_detected", () => {
    const r = run({ n: 3, temperature: 1 }, [
      promptEvent([1]),
      finish(0, 1, "stop", 2),
      finish(1, 1, "stop", "###"),
      finish(2, 1, "repetition", "repetition_detected"),
      done,
    ]);
    expect(r.choices.map((c) => [c.finish_reason, c.stop_reason])).toEqual([
      ["stop", 2],
      ["stop", "###"],
      ["repetition", "repetition_detected"],
    ]);
  });

  it("logprobs: token, logprob (floored at -9999), bytes and top alternatives", () => {
    const r = run({ logprobs: true, top_logprobs: 2 }, [
      promptEvent([1]),
      delta(
        0,
        "Hi",
        [7],
        [
          tokenLogprob(7, "Hi", -0.5, [
            [7, "Hi", -0.5],
            [8, "Ho", Number.NEGATIVE_INFINITY],
          ]),
        ],
      ),
      delta(0, "é", [9], [tokenLogprob(9, "é", -1.25)]),
      finish(0, 2),
      done,
    ]);
    expect(r.choices[0]!.logprobs).toEqual({
      content: [
        {
          token: "Hi",
          logprob: -0.5,
          bytes: [72, 105],
          top_logprobs: [
            { token: "Hi", logprob: -0.5, bytes: [72, 105] },
            { token: "Ho", logprob: -9999, bytes: [72, 111] },
          ],
        },
        { token: "é", logprob: -1.25, bytes: [195, 169], top_logprobs: [] },
      ],
    });
  });

  it("return_token_ids adds prompt_token_ids and each choice's token_ids", () => {
    const r = run({ return_token_ids: true }, [
      promptEvent([1, 2, 3]),
      delta(0, "a", [4]),
      delta(0, "", [5]),
      delta(0, "b", [6]),
      finish(0, 3),
      done,
    ]);
    expect(r.prompt_token_ids).toEqual([1, 2, 3]);
    expect(r.choices[0]!.token_ids).toEqual([4, 5, 6]);
    expect(r.choices[0]!.message.content).toBe("ab");
  });

  it("prompt_logprobs: aligned with the prompt, first null, then id → {logprob, rank, decoded_token}", () => {
    const acc = new ChatCompletionAccumulator(parse({ prompt_logprobs: 1 }), ctx);
    acc.push({
      type: "prompt",
      promptTokenIds: [1, 2],
      cachedTokens: 0,
      queueMs: 0,
      promptLogprobs: [
        null,
        {
          entries: [
            { tokenId: 2, logprob: -3, rank: 4, token: "b" },
            { tokenId: 9, logprob: Number.NEGATIVE_INFINITY, rank: 1, token: "z" },
          ],
        },
      ],
    });
    acc.push(finish(0, 0));
    acc.push(done);
    expect(acc.result().prompt_logprobs).toEqual([
      null,
      {
        "2": { logprob: -3, rank: 4, decoded_token: "b" },
        "9": { logprob: -9999, rank: 1, decoded_token: "z" },
      },
    ]);
  });

  it("echo prepends the last message when its role is the response role", () => {
    const messages = [
      { role: "user", content: "Write a poem" },
      { role: "assistant", content: "Roses are" },
    ];
    const events = [promptEvent([1]), delta(0, " red", [2]), finish(0, 1), done];
    const continued = run(
      { messages, echo: true, add_generation_prompt: false, continue_final_message: true },
      events,
    );
    expect(continued.choices[0]!.message).toMatchObject({ role: "assistant", content: "Roses are red" });
    // With a generation prompt the response role is assistant but the last message is the user's: no echo.
    expect(run({ echo: true }, events).choices[0]!.message.content).toBe(" red");
    // Without one, the response role follows the last message, whatever it is.
    const asUser = run({ echo: true, add_generation_prompt: false }, events);
    expect(asUser.choices[0]!.message).toMatchObject({ role: "user", content: "Hello red" });
  });

  it("echo joins text parts with newlines", () => {
    const messages = [
      {
        role: "assistant",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "b" },
        ],
      },
    ];
    const r = run({ messages, echo: true, add_generation_prompt: false }, [
      promptEvent([1]),
      delta(0, "c", [2]),
      finish(0, 1),
      done,
    ]);
    expect(r.choices[0]!.message.content).toBe("a\nbc");
  });

  it("echoes kv_transfer_params", () => {
    const r = run({ kv_transfer_params: { remote: "x" } }, [promptEvent([1]), finish(0, 0), done]);
    expect(r.kv_transfer_params).toEqual({ remote: "x" });
  });

  it("throws the engine's error as an ApiError", () => {
    const acc = new ChatCompletionAccumulator(parse(), ctx);
    acc.push(promptEvent([1]));
    const e = apiError(() => acc.push({ type: "error", code: "engine_failure", message: "worker died" }));
    expect([e.status, e.message]).toEqual([500, "worker died"]);
  });

  it("refuses to build a result before done", () => {
    const acc = new ChatCompletionAccumulator(parse(), ctx);
    acc.push(promptEvent([1]));
    acc.push(finish(0, 0));
    expect(acc.finished).toBe(false);
    expect(apiError(() => acc.result()).status).toBe(500);
  });

  it("defaults created to the current unix time in seconds", () => {
    const acc = new ChatCompletionAccumulator(parse(), { requestId: "x", model: "m" });
    for (const e of [promptEvent([1]), finish(0, 0), done]) acc.push(e);
    expect(Math.abs(acc.result().created - Date.now() / 1000)).toBeLessThan(5);
  });
});

describe("engineErrorToApiError", () => {
  it("maps each engine error code to its status, keeping the param", () => {
    const cases = [
      [{ code: "invalid_request", message: "too long", param: "messages" }, 400, "messages"],
      [{ code: "invalid_request", message: "bad" }, 400, null],
      [{ code: "priority_not_supported", message: "fcfs" }, 400, "priority"],
      [{ code: "engine_failure", message: "boom" }, 500, null],
      [{ code: "unavailable", message: "shutting down" }, 503, null],
    ] as const;
    for (const [event, status, param] of cases) {
      const e = engineErrorToApiError(event);
      expect(e).toBeInstanceOf(ApiError);
      expect([e.status, e.param, e.message]).toEqual([status, param, event.message]);
    }
  });
});
