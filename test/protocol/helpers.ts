/** Shared builders for the protocol tests: minimal requests, engine events, error assertions. */
import { expect } from "vitest";
import type { EngineEvent, TokenLogprob } from "../../src/core/types.ts";
import { ApiError } from "../../src/errors.ts";
import { type ChatCompletionRequest, parseChatCompletionRequest } from "../../src/protocol/chat-request.ts";

export const USER = { role: "user", content: "Hello" };

/** A valid body plus overrides. */
export function body(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: "m", messages: [USER], ...overrides };
}

export function parse(overrides: Record<string, unknown> = {}): ChatCompletionRequest {
  return parseChatCompletionRequest(body(overrides));
}

/** Runs fn and returns the ApiError it throws (failing the test if it throws nothing or something else). */
export function apiError(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error("expected an ApiError, but nothing was thrown");
}

export function expect400(fn: () => unknown, param: string | null, code?: string): ApiError {
  const e = apiError(fn);
  expect({ status: e.status, param: e.param }).toEqual({ status: 400, param });
  if (code) expect(e.code).toBe(code);
  return e;
}

// ---- engine events ----

export const promptEvent = (ids: number[], cachedTokens = 0): EngineEvent => ({
  type: "prompt",
  promptTokenIds: ids,
  cachedTokens,
  queueMs: 0,
});

export const delta = (
  choice: number,
  text: string,
  tokenIds: number[],
  logprobs?: TokenLogprob[],
): EngineEvent => ({
  type: "delta",
  choice,
  text,
  tokenIds,
  logprobs,
});

export const finish = (
  choice: number,
  completionTokens: number,
  finishReason: "stop" | "length" | "repetition" | "abort" = "stop",
  stopReason: number | string | null = null,
): EngineEvent => ({ type: "finish", choice, finishReason, stopReason, completionTokens });

export const done: EngineEvent = { type: "done" };

export function tokenLogprob(
  tokenId: number,
  token: string,
  logprob: number,
  top: [number, string, number][] = [],
) {
  const bytes = (s: string) => [...new TextEncoder().encode(s)];
  return {
    tokenId,
    token,
    logprob,
    bytes: bytes(token),
    top: top.map(([id, t, lp]) => ({ tokenId: id, token: t, logprob: lp, bytes: bytes(t) })),
  };
}
