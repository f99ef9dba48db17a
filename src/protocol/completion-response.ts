/**
 * The non-streaming completion response: the engine events of every prompt in, vLLM's
 * text_completion object out. Prompt p's choice i has index p * n + i (vLLM). Pure — the caller
 * feeds every event (tagged with its prompt) and asks for the result once each prompt is done.
 */
import type { EngineEvent, FinishReason } from "../core/types.ts";
import { ChoiceTracker, type PromptEvent } from "../engine/choice-tracker.ts";
import { engineErrorToApiError, internalError } from "../errors.ts";
import {
  type CompletionLogprobs,
  generatedTokens,
  type LegacyToken,
  legacyLogprobs,
  promptTokens,
} from "./completion-logprobs.ts";
import type { CompletionRequest } from "./completion-request.ts";
import {
  type PromptLogprobs,
  promptLogprobs,
  type ResponseContext,
  type Usage,
  unixSeconds,
  usage,
} from "./output-parts.ts";

export type { PromptEvent };

export interface CompletionChoice {
  index: number;
  text: string;
  logprobs: CompletionLogprobs | null;
  finish_reason: FinishReason;
  stop_reason: number | string | null;
  token_ids: number[] | null;
  prompt_logprobs: PromptLogprobs | null;
  prompt_token_ids: number[] | null;
}

export interface CompletionResponse {
  id: string;
  object: "text_completion";
  created: number;
  model: string;
  choices: CompletionChoice[];
  service_tier: null;
  system_fingerprint: null;
  usage: Usage;
  kv_transfer_params: Record<string, unknown> | null;
}

export function completionResponseId(requestId: string): string {
  return `cmpl-${requestId}`;
}

/** The echoed prompt's legacy tokens (none without echo or logprobs). */
export function echoedTokens(req: CompletionRequest, p: PromptEvent): LegacyToken[] {
  if (!req.echo || req.logprobs === undefined || !p.echo) return [];
  return promptTokens(p.echo.tokens, p.promptLogprobs ?? [], req.logprobs === -1 ? Infinity : req.logprobs);
}

/** A prompt with nothing to generate (max_tokens 0) ends by length, as vLLM reports it. */
export const SCORED_FINISH = { reason: "length", stopReason: null, completionTokens: 0 } as const;

export class CompletionAccumulator {
  private readonly req: CompletionRequest;
  private readonly ctx: ResponseContext;
  private readonly created: number;
  /** One per prompt. */
  private readonly prompts: ChoiceTracker[];

  constructor(req: CompletionRequest, ctx: ResponseContext) {
    this.req = req;
    this.ctx = ctx;
    this.created = ctx.created ?? unixSeconds();
    this.prompts = req.prompts.map(() => new ChoiceTracker(req.n, { keepOutput: true }));
  }

  /** Consumes one event of prompt `promptIndex`; an engine error event is thrown as its ApiError. */
  push(event: EngineEvent, promptIndex = 0): void {
    const p = this.prompts[promptIndex];
    if (!p)
      throw internalError(`The engine sent an event for prompt ${promptIndex} of ${this.prompts.length}.`);
    if (event.type === "error") throw engineErrorToApiError(event);
    p.push(event);
  }

  result(): CompletionResponse {
    const req = this.req;
    let promptTokens = 0;
    let cachedTokens = 0;
    let completionTokens = 0;
    const choices = this.prompts.flatMap((p, pi): CompletionChoice[] => {
      if (!p.done || !p.prompt) throw internalError("The engine ended the request before it finished.");
      const prompt = p.prompt;
      promptTokens += prompt.promptTokenIds.length;
      cachedTokens += prompt.cachedTokens;
      const echoText = req.echo ? (prompt.echo?.text ?? "") : "";
      const echoed = echoedTokens(req, prompt);
      return p.choices.map((c, i) => {
        const finish = c.finish ?? (req.max_tokens === 0 ? SCORED_FINISH : undefined);
        if (!finish) throw internalError(`The engine finished without finishing choice ${i}.`);
        completionTokens += finish.completionTokens;
        return {
          index: pi * req.n + i,
          text: echoText + c.text,
          logprobs:
            req.logprobs === undefined
              ? null
              : legacyLogprobs([...echoed, ...generatedTokens(c.logprobs ?? [])], 0).logprobs,
          finish_reason: finish.reason,
          stop_reason: finish.stopReason,
          token_ids: req.return_token_ids ? c.tokenIds : null,
          prompt_logprobs: prompt.promptLogprobs ? promptLogprobs(prompt.promptLogprobs) : null,
          prompt_token_ids: req.return_token_ids ? prompt.promptTokenIds : null,
        };
      });
    });
    return {
      id: completionResponseId(this.ctx.requestId),
      object: "text_completion",
      created: this.created,
      model: this.ctx.model,
      choices,
      service_tier: null,
      system_fingerprint: null,
      usage: usage(promptTokens, completionTokens, cachedTokens),
      kv_transfer_params: req.kv_transfer_params ?? null,
    };
  }
}
