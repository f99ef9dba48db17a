/**
 * Pieces shared by the full response and the stream: ids, the response role, echo, usage and the
 * logprob shapes vLLM returns.
 */

import type { PromptTokenLogprob, TokenLogprob } from "../core/types.ts";
import type { ToolParserName } from "../models/registry/types.ts";
import type { ChatCompletionRequest } from "./chat-request.ts";
import { contentText } from "./messages.ts";

/** What a response needs beyond the request and the events. */
export interface ResponseContext {
  /** The request id (X-Request-Id header or the body's request_id); the response id is `chatcmpl-<id>`. */
  requestId: string;
  /** The served model name. */
  model: string;
  /** Unix seconds; defaults to now. */
  created?: number;
  /** The model's tool-call parser (chat with tool_choice other than "none" uses it). */
  toolParser?: ToolParserName;
  /** A reasoning model's chat: whether its output starts inside the think block. */
  reasoning?: { opened: boolean };
}

export function completionId(requestId: string): string {
  return `chatcmpl-${requestId}`;
}

export function unixSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** "assistant" after a generation prompt; otherwise the model continues the last message's role (vLLM). */
export function responseRole(req: ChatCompletionRequest): string {
  return req.add_generation_prompt ? "assistant" : req.messages.at(-1)!.role;
}

/** With echo, the last message's text when its role is the response role; otherwise "". */
export function echoText(req: ChatCompletionRequest): string {
  if (!req.echo) return "";
  const last = req.messages.at(-1)!;
  return last.role === responseRole(req) ? contentText(last.content) : "";
}

export interface TopLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

export interface LogprobEntry extends TopLogprob {
  top_logprobs: TopLogprob[];
}

export interface ChoiceLogprobs {
  content: LogprobEntry[];
}

/** vLLM never returns -inf (JSON cannot carry it): logprobs are floored here. */
const LOGPROB_FLOOR = -9999.0;

const floor = (lp: number) => Math.max(lp, LOGPROB_FLOOR);

export function logprobEntries(logprobs: readonly TokenLogprob[]): LogprobEntry[] {
  return logprobs.map((l) => ({
    token: l.token,
    logprob: floor(l.logprob),
    bytes: l.bytes,
    top_logprobs: l.top.map((t) => ({ token: t.token, logprob: floor(t.logprob), bytes: t.bytes })),
  }));
}

export interface PromptLogprobEntry {
  logprob: number;
  rank: number;
  decoded_token: string;
}

/** Aligned with the prompt: null for the first token, then token id (as a string) → entry. */
export type PromptLogprobs = (Record<string, PromptLogprobEntry> | null)[];

export function promptLogprobs(entries: readonly (PromptTokenLogprob | null)[]): PromptLogprobs {
  return entries.map((e) =>
    e === null
      ? null
      : Object.fromEntries(
          e.entries.map((x) => [
            String(x.tokenId),
            { logprob: floor(x.logprob), rank: x.rank, decoded_token: x.token },
          ]),
        ),
  );
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  /** Chat: the completion's tokens inside a reasoning model's think block (0 for other models). */
  completion_tokens_details?: { reasoning_tokens: number };
}

export function usage(
  promptTokens: number,
  completionTokens: number,
  cachedTokens?: number,
  reasoningTokens?: number,
): Usage {
  const u: Usage = {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
  if (cachedTokens !== undefined) u.prompt_tokens_details = { cached_tokens: cachedTokens };
  if (reasoningTokens !== undefined) u.completion_tokens_details = { reasoning_tokens: reasoningTokens };
  return u;
}
