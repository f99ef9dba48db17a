/**
 * The non-streaming response: engine events in, vLLM's chat.completion object out. Pure — the
 * caller feeds every event of one request and asks for the result after `done`.
 */

import type { EngineEvent, FinishReason } from "../core/types.ts";
import { engineErrorToApiError, internalError } from "../errors.ts";
import type { ChatCompletionRequest } from "./chat-request.ts";
import {
  type ChoiceLogprobs,
  completionId,
  echoText,
  type LogprobEntry,
  logprobEntries,
  type PromptLogprobs,
  promptLogprobs,
  type ResponseContext,
  responseRole,
  type Usage,
  unixSeconds,
  usage,
} from "./output-parts.ts";
import { parseToolCalls, type ToolCall, toolCallParser } from "./tool-calls/parsers.ts";

export interface ChatCompletionMessage {
  role: string;
  content: string | null;
  refusal: null;
  annotations: null;
  audio: null;
  function_call: null;
  tool_calls: ToolCall[];
  reasoning: null;
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

interface ChoiceState {
  text: string;
  tokenIds: number[];
  logprobs: LogprobEntry[];
  finish?: { reason: FinishReason; stopReason: number | string | null; completionTokens: number };
}

export class ChatCompletionAccumulator {
  private readonly req: ChatCompletionRequest;
  private readonly ctx: ResponseContext;
  private readonly created: number;
  private readonly choices: ChoiceState[];
  private prompt?: Extract<EngineEvent, { type: "prompt" }>;
  private done = false;

  constructor(req: ChatCompletionRequest, ctx: ResponseContext) {
    this.req = req;
    this.ctx = ctx;
    this.created = ctx.created ?? unixSeconds();
    this.choices = Array.from({ length: req.n }, () => ({ text: "", tokenIds: [], logprobs: [] }));
  }

  /** True once the `done` event arrived. */
  get finished(): boolean {
    return this.done;
  }

  /** Consumes one event; an engine error event is thrown as its ApiError. */
  push(event: EngineEvent): void {
    switch (event.type) {
      case "prompt":
        this.prompt = event;
        break;
      case "delta": {
        const c = this.choice(event.choice);
        c.text += event.text;
        c.tokenIds.push(...event.tokenIds);
        if (event.logprobs) c.logprobs.push(...logprobEntries(event.logprobs));
        break;
      }
      case "finish":
        this.choice(event.choice).finish = {
          reason: event.finishReason,
          stopReason: event.stopReason,
          completionTokens: event.completionTokens,
        };
        break;
      case "done":
        this.done = true;
        break;
      case "error":
        throw engineErrorToApiError(event);
    }
  }

  result(): ChatCompletionResponse {
    if (!this.done || !this.prompt) throw internalError("The engine ended the request before it finished.");
    const req = this.req;
    const role = responseRole(req);
    const echo = echoText(req);
    const choices = this.choices.map((c, index): ChatCompletionChoice => {
      if (!c.finish) throw internalError(`The engine finished without finishing choice ${index}.`);
      const parser = toolCallParser(req, this.ctx.toolParser);
      const { content, calls } = parser
        ? parseToolCalls(parser, c.text)
        : { content: c.text, calls: [] as ToolCall[] };
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
          reasoning: null,
        },
        logprobs: req.logprobs ? { content: c.logprobs } : null,
        finish_reason: calls.length > 0 && c.finish.reason === "stop" ? "tool_calls" : c.finish.reason,
        stop_reason: c.finish.stopReason,
        token_ids: req.return_token_ids ? c.tokenIds : null,
      };
    });
    const p = this.prompt;
    const completionTokens = this.choices.reduce((sum, c) => sum + c.finish!.completionTokens, 0);
    return {
      id: completionId(this.ctx.requestId),
      object: "chat.completion",
      created: this.created,
      model: this.ctx.model,
      choices,
      service_tier: null,
      system_fingerprint: null,
      usage: usage(p.promptTokenIds.length, completionTokens, p.cachedTokens),
      prompt_logprobs: p.promptLogprobs ? promptLogprobs(p.promptLogprobs) : null,
      prompt_token_ids: req.return_token_ids ? p.promptTokenIds : null,
      kv_transfer_params: req.kv_transfer_params ?? null,
    };
  }

  private choice(index: number): ChoiceState {
    const c = this.choices[index];
    if (!c) throw internalError(`The engine sent an event for choice ${index} of ${this.choices.length}.`);
    return c;
  }
}
