/**
 * The update stage of a step: the pass's tokens are in the cache now (rows and prompts advance),
 * prompt logprobs are gathered, sampled tokens join their choices (stop checks, detokenizing,
 * events, jump-forward), beam searches advance, a prompt the step completed reports it and starts
 * decoding, and requests whose every choice is done finish.
 */
import type { TokenizerLike } from "../output/tokenizer-like.ts";
import type { SampledToken } from "../sample/params.ts";
import { type ActiveRequest, finish, liveRows } from "./active-request.ts";
import type { StepPlan } from "./plan.ts";
import { collectPromptLogprobs } from "./prompt-logprobs.ts";
import type { Sampled } from "./sample.ts";
import type { Scheduler } from "./schedule.ts";
import type { Sequence } from "./sequence.ts";

export interface UpdateContext {
  scheduler: Scheduler;
  tokenizer: TokenizerLike;
}

export async function update(plan: StepPlan, sampled: Sampled, ctx: UpdateContext): Promise<void> {
  const { scheduler } = ctx;
  for (const run of plan.runs) {
    const a = run.request;
    if (run.row) {
      run.row.computed(run.tokens.length);
      continue;
    }
    const rows = sampled.promptRows.get(a);
    if (rows && a.req.promptLogprobs !== undefined)
      collectPromptLogprobs(a, rows, sampled.vocab, run.start, run.tokens.length, ctx.tokenizer);
    if (rows && a.req.promptLogits) a.promptLogits.push(rows.slice());
    a.computed += run.tokens.length;
  }
  for (const c of sampled.tokens) if (!c.first) deliver(c.request, c.seq, c.token);
  for (const [a, logits] of sampled.beams)
    if (a.state === "decoding") await advanceBeams(a, logits, scheduler);
  for (const run of plan.runs) {
    if (!run.completesPrompt) continue;
    const a = run.request;
    emitPrompt(a, sampled.vocab);
    scheduler.promptDone(a);
    if (a.state !== "decoding") continue;
    const first = sampled.beams.get(a);
    if (first) await advanceBeams(a, first, scheduler);
    else for (const c of sampled.tokens) if (c.first && c.request === a) deliver(a, c.seq, c.token);
  }
  for (const a of new Set(plan.runs.map((r) => r.request)))
    if (a.state === "decoding" && liveRows(a).length === 0) {
      finish(a, "complete");
      scheduler.leave(a);
    }
}

/**
 * Appends a sampled token to a choice and forwards the events it produces; then, where its
 * grammar forces at least JUMP_MINIMUM tokens, those join it too (jump-forward).
 */
function deliver(a: ActiveRequest, seq: Sequence, sampled: SampledToken): void {
  for (const e of seq.append(sampled)) a.emit(e);
  for (const e of seq.jumpForward(JUMP_MINIMUM)) a.emit(e);
}

/**
 * Fewest forced tokens a jump takes. Forced tokens are the tokenizer's, not necessarily the ones
 * sampling would pick, so where jumps happen shapes the output: the minimum is one number, not one
 * that follows the batch's size, or a greedy constrained request's text would depend on what else
 * is running. A row's forced tokens join its next step's one forward pass (with ortserve's
 * attention kernel), where a token costs a fraction of a step; two already save a step. (Without
 * that kernel they take a pass of their own, about a one-row decode step.)
 */
export const JUMP_MINIMUM = 2;

/** The first event of every request: the prompt as the model saw it (and its logprobs if asked). */
function emitPrompt(a: ActiveRequest, vocab: number): void {
  let promptLogits: Float32Array | undefined;
  if (a.req.promptLogits) {
    promptLogits = new Float32Array(a.promptIds.length * vocab);
    let at = 0;
    for (const rows of a.promptLogits) {
      promptLogits.set(rows, at);
      at += rows.length;
    }
    a.promptLogits = [];
  }
  a.emit({
    type: "prompt",
    promptTokenIds: a.promptIds,
    cachedTokens: a.cachedTokens,
    queueMs: a.queueMs ?? 0,
    promptLogprobs: a.req.promptLogprobs !== undefined ? a.promptLogprobs : undefined,
    promptLogits,
    echo: a.echo,
  });
}

/** One beam-search step from its live beams' logits rows; the next plan copies KV rows after their beams. */
async function advanceBeams(a: ActiveRequest, logits: Float32Array[], scheduler: Scheduler): Promise<void> {
  await a.beams!.advance(logits, (moves) => {
    scheduler.copyRows(moves.map((m) => ({ from: m.from, to: m.to, length: m.length })));
  });
}
