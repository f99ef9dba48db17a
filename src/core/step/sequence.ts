/**
 * One generated choice: its sampler, its output text, its optional token constraint, and the vLLM
 * stop checks applied after each sampled token (min_tokens → EOS → stop_token_ids → stop strings →
 * length → repetition). Its KV row is the scheduler's business.
 */

import type { SequenceText } from "../output/sequence-text.ts";
import { tokenBytes, tokenLogprobText } from "../output/token-text.ts";
import type { TokenizerLike } from "../output/tokenizer-like.ts";
import type { SampledToken } from "../sample/params.ts";
import { detectRepetition, type RepetitionDetection } from "../sample/repetition.ts";
import type { SequenceSampler } from "../sample/sampler.ts";
import type { EngineEvent, FinishReason, TokenLogprob } from "../types.ts";
import type { SequenceRow } from "./active-request.ts";
import type { TokenConstraint } from "./constrain.ts";
import type { ThinkBlock } from "./think-block.ts";

export interface SequenceLimits {
  maxTokens: number;
  minTokens: number;
  eosTokenIds: ReadonlySet<number>;
  stopTokenIds: ReadonlySet<number>;
  ignoreEos: boolean;
  repetition?: RepetitionDetection;
  returnTokensAsTokenIds: boolean;
  wantLogprobs: boolean;
}

interface Finish {
  reason: FinishReason;
  stopReason: number | string | null;
}

export class Sequence implements SequenceRow {
  readonly choice: number;
  readonly sampler: SequenceSampler;
  /** Limits the tokens this sequence may sample (structured outputs). */
  readonly constraint?: TokenConstraint;
  readonly outputIds: number[] = [];
  /** Positions held in the KV cache. */
  length: number;
  /** Last sampled token: the input of the next decode step. */
  lastToken = -1;
  /**
   * Jump-forward tokens in the output after `lastToken` but not yet in the KV cache: the row's next
   * step computes them after `lastToken`, and samples from the last one's logits.
   */
  forced: number[] = [];
  finished = false;
  private readonly text: SequenceText;
  private readonly limits: SequenceLimits;
  private readonly tokenizer: TokenizerLike;
  /** Text → ids for jump-forward; absent when the request may not jump (no constraint, logprobs). */
  private readonly encode?: (text: string) => number[];
  /** A reasoning model's think block: its tokens are counted, and closed when a budget is spent. */
  private readonly think?: ThinkBlock;

  constructor(
    choice: number,
    sampler: SequenceSampler,
    text: SequenceText,
    tokenizer: TokenizerLike,
    limits: SequenceLimits,
    length: number,
    constraint?: TokenConstraint,
    encode?: (text: string) => number[],
    think?: ThinkBlock,
  ) {
    this.think = think;
    this.constraint = constraint;
    this.encode = encode;
    this.choice = choice;
    this.sampler = sampler;
    this.text = text;
    this.tokenizer = tokenizer;
    this.limits = limits;
    this.length = length;
  }

  private logprobEntry(sampled: SampledToken): TokenLogprob {
    const tok = this.tokenizer;
    const asIds = this.limits.returnTokensAsTokenIds;
    return {
      tokenId: sampled.tokenId,
      token: tokenLogprobText(tok, sampled.tokenId, asIds),
      logprob: sampled.logprob!,
      bytes: [...tokenBytes(tok, sampled.tokenId)],
      top: (sampled.topLogprobs ?? []).map((t) => ({
        tokenId: t.tokenId,
        token: tokenLogprobText(tok, t.tokenId, asIds),
        logprob: t.logprob,
        bytes: [...tokenBytes(tok, t.tokenId)],
      })),
    };
  }

  /** The sample stage for this sequence: its next token from one logits row (and its allowed-token mask). */
  sample(logits: Float32Array, mask?: Uint32Array): SampledToken {
    return this.sampler.sample(logits, this.outputIds, mask);
  }

  /** The update stage: appends a sampled token, applies the stop checks and returns the events to emit. */
  append(sampled: SampledToken): EngineEvent[] {
    const id = sampled.tokenId;
    // A token the grammar refuses can only come from an empty mask: the output ends before it.
    if (this.constraint?.accept(id) === false) return [this.finishEvent("stop", null)];
    this.lastToken = id;
    const { text, finish } = this.advance(id);
    const events: EngineEvent[] = [
      {
        type: "delta",
        choice: this.choice,
        tokenIds: [id],
        text,
        logprobs: this.limits.wantLogprobs ? [this.logprobEntry(sampled)] : undefined,
      },
    ];
    if (finish) events.push(this.finishEvent(finish.reason, finish.stopReason));
    return events;
  }

  /**
   * Jump-forward: the tokens the constraint forces next (at least `minimum`) join the output
   * without sampling, with the same stop checks, as one delta. They wait in `forced` until the
   * row's next step computes them in one pass. Returns the events to emit (none without a jump).
   */
  jumpForward(minimum: number): EngineEvent[] {
    const c = this.constraint;
    if (this.finished || !this.encode || !c?.forcedTokens) return [];
    const ids = c.forcedTokens(this.encode, minimum, this.limits.maxTokens - this.outputIds.length);
    if (ids.length === 0) return [];
    let text = "";
    let finish: Finish | undefined;
    const taken: number[] = [];
    for (const id of ids) {
      const step = this.advance(id);
      taken.push(id);
      text += step.text;
      finish = step.finish;
      if (finish) break;
    }
    const events: EngineEvent[] = [{ type: "delta", choice: this.choice, tokenIds: taken, text }];
    if (finish) events.push(this.finishEvent(finish.reason, finish.stopReason));
    else this.forced = taken;
    return events;
  }

  nextTokens(): number[] {
    return [this.lastToken, ...this.forced];
  }

  /** The pass computed the planned tokens: the last sampled one and the forced ones. */
  computed(count: number): void {
    this.length += count;
    this.forced = [];
  }

  /** One output token (the constraint already took it): stop checks and the text it completes. */
  private advance(id: number): { text: string; finish?: Finish } {
    this.outputIds.push(id);
    this.think?.push(id, tokenBytes(this.tokenizer, id));
    const n = this.outputIds.length;
    const l = this.limits;

    let finish: Finish | undefined;
    let stopToken = false;
    if (n >= l.minTokens) {
      if (!l.ignoreEos && l.eosTokenIds.has(id)) finish = { reason: "stop", stopReason: null };
      else if (l.stopTokenIds.has(id)) finish = { reason: "stop", stopReason: id };
      stopToken = finish !== undefined;
    }
    const step = this.text.push(id, stopToken);
    let text = step.text;
    if (!finish && step.stop !== undefined) finish = { reason: "stop", stopReason: step.stop };
    if (!finish && n >= l.maxTokens) finish = { reason: "length", stopReason: null };
    if (!finish && l.repetition && n >= l.minTokens && detectRepetition(this.outputIds, l.repetition))
      finish = { reason: "repetition", stopReason: "repetition_detected" };
    // The grammar is complete and took its stop token (also with ignore_eos): nothing may follow.
    if (!finish && this.constraint?.terminated) finish = { reason: "stop", stopReason: null };
    if (finish && step.stop === undefined) text += this.text.finish();
    return { text, finish };
  }

  finishEvent(reason: FinishReason, stopReason: number | string | null): EngineEvent {
    this.finished = true;
    this.constraint?.release?.();
    return {
      type: "finish",
      choice: this.choice,
      finishReason: reason,
      stopReason,
      completionTokens: this.outputIds.length,
      ...(this.think && { reasoningTokens: this.think.reasoningTokens }),
    };
  }
}
