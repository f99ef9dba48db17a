/**
 * The streaming completion response: engine events of every prompt in, vLLM's text_completion
 * chunks out, one choice per chunk (index p * n + i), in arrival order. Pure — the caller writes
 * each frame as `data: <json>` and ends the stream with `data: [DONE]` once `finished` is true.
 *
 * Per choice: with echo, a chunk holding the prompt (its tokens' logprobs first); then a chunk per
 * delta and a finish chunk. A usage chunk (no choices) follows the last prompt's end when
 * stream_options.include_usage is set.
 */
import type { EngineEvent, FinishReason } from "../core/types.ts";
import { ChoiceTracker } from "../engine/choice-tracker.ts";
import { type ApiError, type ApiErrorBody, engineErrorToApiError } from "../errors.ts";
import { codePointLength } from "../util/code-points.ts";
import { generatedTokens, type LegacyToken, legacyLogprobs } from "./completion-logprobs.ts";
import type { CompletionRequest } from "./completion-request.ts";
import {
  type CompletionChoice,
  completionResponseId,
  echoedTokens,
  type PromptEvent,
  SCORED_FINISH,
} from "./completion-response.ts";
import { type ResponseContext, type Usage, unixSeconds, usage } from "./output-parts.ts";

export interface CompletionChunkChoice {
  index: number;
  text: string;
  logprobs: CompletionChoice["logprobs"];
  finish_reason: FinishReason | null;
  stop_reason?: number | string | null;
  token_ids?: number[] | null;
  prompt_token_ids?: number[];
}

export interface CompletionChunk {
  id: string;
  object: "text_completion";
  created: number;
  model: string;
  choices: CompletionChunkChoice[];
  usage?: Usage;
}

export type CompletionStreamFrame =
  | { type: "chunk"; data: CompletionChunk }
  | { type: "error"; error: ApiError; data: ApiErrorBody };

/** What a choice's chunks need beyond its engine state (ChoiceTracker). */
interface ChoiceProgress {
  /** Characters of the choice's text sent so far (legacy text_offset counts from here). */
  textLength: number;
  /** Prompt token ids still to attach to the choice's first chunk (return_token_ids). */
  promptTokenIds?: number[];
}

export class CompletionStreamer {
  private readonly req: CompletionRequest;
  private readonly id: string;
  private readonly model: string;
  private readonly created: number;
  private readonly includeUsage: boolean;
  private readonly continuousUsage: boolean;
  private readonly choices: ChoiceProgress[];
  /** One per prompt. */
  private readonly prompts: ChoiceTracker[];
  private ended = false;

  constructor(req: CompletionRequest, ctx: ResponseContext) {
    this.req = req;
    this.id = completionResponseId(ctx.requestId);
    this.model = ctx.model;
    this.created = ctx.created ?? unixSeconds();
    this.includeUsage = req.stream_options?.include_usage ?? false;
    this.continuousUsage = this.includeUsage && (req.stream_options?.continuous_usage_stats ?? false);
    this.choices = Array.from({ length: req.prompts.length * req.n }, () => ({ textLength: 0 }));
    this.prompts = req.prompts.map(() => new ChoiceTracker(req.n, { keepOutput: false }));
  }

  /** True after the last frame (usage chunk or error): the caller then writes [DONE]. */
  get finished(): boolean {
    return this.ended;
  }

  push(event: EngineEvent, promptIndex = 0): CompletionStreamFrame[] {
    if (this.ended) return [];
    const frames: CompletionStreamFrame[] = [];
    const base = promptIndex * this.req.n;
    const p = this.prompts[promptIndex]!;
    p.push(event);
    switch (event.type) {
      case "prompt":
        this.started(promptIndex, event, frames);
        break;
      case "delta": {
        if (event.text === "" && event.tokenIds.length === 0) break;
        frames.push(
          this.text(
            promptIndex,
            base + event.choice,
            event.text,
            generatedTokens(event.logprobs ?? []),
            event.tokenIds,
          ),
        );
        break;
      }
      case "finish":
        frames.push(this.finish(promptIndex, base + event.choice, event));
        break;
      case "done": {
        // A prompt that only scored (max_tokens 0) gets no finish events from the engine.
        p.choices.forEach((c, i) => {
          if (!c.finish)
            frames.push(
              this.finish(promptIndex, base + i, {
                finishReason: SCORED_FINISH.reason,
                stopReason: SCORED_FINISH.stopReason,
                completionTokens: 0,
              }),
            );
        });
        if (this.prompts.every((q) => q.done)) {
          if (this.includeUsage)
            frames.push({ type: "chunk", data: { ...this.envelope([]), usage: this.total() } });
          this.ended = true;
        }
        break;
      }
      case "error":
        frames.push(this.fail(engineErrorToApiError(event)));
        break;
    }
    return frames;
  }

  /** The error frame for a failure the caller caught itself (e.g. the engine stream threw). */
  fail(error: ApiError): CompletionStreamFrame {
    this.ended = true;
    return { type: "error", error, data: error.toBody() };
  }

  /** A prompt's first event: its counts, and with echo a chunk of its text per choice. */
  private started(promptIndex: number, event: PromptEvent, frames: CompletionStreamFrame[]): void {
    const base = promptIndex * this.req.n;
    for (let i = base; i < base + this.req.n; i++)
      if (this.req.return_token_ids) this.choices[i]!.promptTokenIds = event.promptTokenIds;
    if (!this.req.echo) return;
    const echoed = echoedTokens(this.req, event);
    for (let i = base; i < base + this.req.n; i++)
      frames.push(this.text(promptIndex, i, event.echo?.text ?? "", echoed, event.promptTokenIds));
  }

  private text(
    promptIndex: number,
    index: number,
    text: string,
    tokens: LegacyToken[],
    tokenIds: number[],
  ): CompletionStreamFrame {
    const c = this.choices[index]!;
    let logprobs: CompletionChoice["logprobs"] = null;
    if (this.req.logprobs !== undefined) logprobs = legacyLogprobs(tokens, c.textLength).logprobs;
    c.textLength += codePointLength(text);
    return this.chunk(promptIndex, index, {
      index,
      text,
      logprobs,
      finish_reason: null,
      token_ids: this.req.return_token_ids ? tokenIds : null,
    });
  }

  private finish(
    promptIndex: number,
    index: number,
    e: { finishReason: FinishReason; stopReason: number | string | null; completionTokens: number },
  ): CompletionStreamFrame {
    return this.chunk(promptIndex, index, {
      index,
      text: "",
      logprobs: null,
      finish_reason: e.finishReason,
      stop_reason: e.stopReason,
      token_ids: this.req.return_token_ids ? [] : null,
    });
  }

  private chunk(promptIndex: number, index: number, choice: CompletionChunkChoice): CompletionStreamFrame {
    const c = this.choices[index]!;
    if (c.promptTokenIds) {
      choice.prompt_token_ids = c.promptTokenIds;
      c.promptTokenIds = undefined;
    }
    const data = this.envelope([choice]);
    // vLLM: per-chunk usage counts this prompt's tokens and the choice's tokens so far.
    if (this.continuousUsage) {
      const p = this.prompts[promptIndex]!;
      data.usage = usage(p.prompt?.promptTokenIds.length ?? 0, p.choices[index % this.req.n]!.tokens);
    }
    return { type: "chunk", data };
  }

  private total(): Usage {
    const prompt = this.prompts.reduce((a, p) => a + (p.prompt?.promptTokenIds.length ?? 0), 0);
    const cached = this.prompts.reduce((a, p) => a + (p.prompt?.cachedTokens ?? 0), 0);
    const completion = this.prompts.reduce((a, p) => a + p.completionTokens(), 0);
    return usage(prompt, completion, cached);
  }

  private envelope(choices: CompletionChunkChoice[]): CompletionChunk {
    return { id: this.id, object: "text_completion", created: this.created, model: this.model, choices };
  }
}
