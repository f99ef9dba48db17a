/**
 * The non-streaming response: engine events in, vLLM's chat.completion object out. Pure — the
 * caller feeds every event of one request and asks for the result after `done`.
 */

import type { EngineEvent, FinishReason } from "../core/types.ts";
import { ChoiceTracker } from "../engine/choice-tracker.ts";
import { engineErrorToApiError, internalError } from "../errors.ts";
import type { ChatCompletionRequest } from "./chat-request.ts";
import {
  type ChoiceLogprobs,
  completionId,
  echoText,
  logprobEntries,
  type PromptLogprobs,
  promptLogprobs,
  type ResponseContext,
  responseRole,
  type Usage,
  unixSeconds,
  usage,
} from "./output-parts.ts";
import { splitReasoning } from "./reasoning/think-parser.ts";
import { parseToolCalls, type ToolCall, toolCallParser } from "./tool-calls/parsers.ts";

export interface ChatCompletionMessage {
  role: string;
  content: string | null;
  refusal: null;
  annotations: null;
  audio: null;
  function_call: null;
  tool_calls: ToolCall[];
  /** A reasoning model's think block (null without one, or with include_reasoning false). */
  reasoning: string | null;
  /** The same text under the name llama.cpp, SGLang and older vLLM use; reasoning models only. */
  reasoning_content?: string | null;
}

export interface ChatCompletionChoice {
  index: number;
  message: ChatCompletionMessage;
  logprobs: ChoiceLogprobs | null;
  /** tool_calls: the model stopped after calling tools. */
  finish_reason: FinishReason | "tool_calls";
  stop_reason: number | string | null;
  token_ids: number[] | null;
}

export interface ChatCompletionResponse {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: ChatCompletionChoice[];
  service_tier: null;
  system_fingerprint: null;
  usage: Usage;
  prompt_logprobs: PromptLogprobs | null;
  prompt_token_ids: number[] | null;
  kv_transfer_params: Record<string, unknown> | null;
}

export class ChatCompletionAccumulator {
  private readonly req: ChatCompletionRequest;
  private readonly ctx: ResponseContext;
  private readonly created: number;
  private readonly tracker: ChoiceTracker;

  constructor(req: ChatCompletionRequest, ctx: ResponseContext) {
    this.req = req;
    this.ctx = ctx;
    this.created = ctx.created ?? unixSeconds();
    this.tracker = new ChoiceTracker(req.n, { keepOutput: true });
  }

  /** True once the `done` event arrived. */
  get finished(): boolean {
    return this.tracker.done;
  }

  /** Consumes one event; an engine error event is thrown as its ApiError. */
  push(event: EngineEvent): void {
    if (event.type === "error") throw engineErrorToApiError(event);
    this.tracker.push(event);
  }

  result(): ChatCompletionResponse {
    const { done, prompt: p, choices: states } = this.tracker;
    if (!done || !p) throw internalError("The engine ended the request before it finished.");
    const req = this.req;
    const role = responseRole(req);
    const echo = echoText(req);
    const choices = states.map((c, index): ChatCompletionChoice => {
      if (!c.finish) throw internalError(`The engine finished without finishing choice ${index}.`);
      const thinking = this.ctx.reasoning;
      const split = thinking ? splitReasoning(c.text, thinking.opened) : { reasoning: null, content: c.text };
      const answer = split.content ?? "";
      const parser = toolCallParser(req, this.ctx.toolParser);
      const parsed = parser ? parseToolCalls(parser, answer) : { content: answer, calls: [] as ToolCall[] };
      const { calls } = parsed;
      // Output that ended inside the think block has no answer at all.
      const content = split.content === null ? null : parsed.content;
      const reasoning = req.include_reasoning ? split.reasoning : null;
      return {
        index,
        message: {
          role,
          content: echo ? echo + (content ?? "") : content,
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          tool_calls: calls,
          reasoning,
          ...(thinking && { reasoning_content: reasoning }),
        },
        logprobs: req.logprobs ? { content: logprobEntries(c.logprobs ?? []) } : null,
        finish_reason: calls.length > 0 && c.finish.reason === "stop" ? "tool_calls" : c.finish.reason,
        stop_reason: c.finish.stopReason,
        token_ids: req.return_token_ids ? c.tokenIds : null,
      };
    });
    const completionTokens = this.tracker.completionTokens();
    return {
      id: completionId(this.ctx.requestId),
      object: "chat.completion",
      created: this.created,
      model: this.ctx.model,
      choices,
      service_tier: null,
      system_fingerprint: null,
      usage: usage(p.promptTokenIds.length, completionTokens, p.cachedTokens, this.tracker.reasoningTokens()),
      prompt_logprobs: p.promptLogprobs ? promptLogprobs(p.promptLogprobs) : null,
      prompt_token_ids: req.return_token_ids ? p.promptTokenIds : null,
      kv_transfer_params: req.kv_transfer_params ?? null,
    };
  }
}
