/**
 * One engine request's choices as its events build them: the prompt event, each choice's tokens
 * so far and finish, and (when kept) its text, token ids and logprobs. Every consumer that needs
 * per-choice state — `Engine.generate` and the chat and completion accumulators and streamers —
 * reads it from one of these rather than rebuilding it from the events itself.
 */
import type { EngineEvent, FinishReason, TokenLogprob } from "../core/types.ts";
import { internalError } from "../errors.ts";

export type PromptEvent = Extract<EngineEvent, { type: "prompt" }>;

export interface ChoiceFinish {
  reason: FinishReason;
  stopReason: number | string | null;
  completionTokens: number;
  /** Tokens inside a reasoning model's think block (absent for a model without a reasoning parser). */
  reasoningTokens?: number;
}

export interface ChoiceState {
  /** An event named this choice. */
  reported: boolean;
  /** Tokens generated so far; the finish event's count once finished. */
  tokens: number;
  finish?: ChoiceFinish;
  /** The output so far (empty unless the tracker keeps output). */
  text: string;
  tokenIds: number[];
  /** Present once a delta carried logprobs (and the tracker keeps output). */
  logprobs?: TokenLogprob[];
}

export class ChoiceTracker {
  readonly choices: ChoiceState[];
  prompt?: PromptEvent;
  /** The `done` event arrived. */
  done = false;
  private readonly keepOutput: boolean;

  /**
   * `n`: the request's choices (an event for another is an engine fault). `keepOutput`: collect
   * text, token ids and logprobs; a streamer, which forwards them as they come, leaves it off.
   */
  constructor(n: number, opts: { keepOutput: boolean }) {
    this.keepOutput = opts.keepOutput;
    this.choices = Array.from({ length: n }, () => ({ reported: false, tokens: 0, text: "", tokenIds: [] }));
  }

  /**
   * Applies a prompt, delta, finish or done event and returns the choice a delta or finish
   * named. An error event changes nothing: reporting it is the caller's.
   */
  push(event: EngineEvent): ChoiceState | undefined {
    switch (event.type) {
      case "prompt":
        this.prompt = event;
        return undefined;
      case "delta": {
        const c = this.choice(event.choice);
        c.tokens += event.tokenIds.length;
        if (this.keepOutput) {
          c.text += event.text;
          c.tokenIds.push(...event.tokenIds);
          if (event.logprobs) {
            c.logprobs ??= [];
            c.logprobs.push(...event.logprobs);
          }
        }
        return c;
      }
      case "finish": {
        const c = this.choice(event.choice);
        c.tokens = event.completionTokens;
        c.finish = {
          reason: event.finishReason,
          stopReason: event.stopReason,
          completionTokens: event.completionTokens,
          ...(event.reasoningTokens !== undefined && { reasoningTokens: event.reasoningTokens }),
        };
        return c;
      }
      case "done":
        this.done = true;
        return undefined;
      case "error":
        return undefined;
    }
  }

  /** Tokens generated so far over every choice. */
  completionTokens(): number {
    return this.choices.reduce((sum, c) => sum + c.tokens, 0);
  }

  /** Reasoning tokens over every finished choice (0 without a reasoning parser). */
  reasoningTokens(): number {
    return this.choices.reduce((sum, c) => sum + (c.finish?.reasoningTokens ?? 0), 0);
  }

  private choice(index: number): ChoiceState {
    const c = this.choices[index];
    if (!c) throw internalError(`The engine sent an event for choice ${index} of ${this.choices.length}.`);
    c.reported = true;
    return c;
  }
}
