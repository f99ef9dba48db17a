/**
 * The update stage: sampled tokens join their sequences (stop checks, detokenizing, events), beam
 * groups advance with their rows' logits, and a request whose prompt is fully computed reports it.
 */
import type { KvRows } from "../runner/kv-rows.ts";
import type { SampledToken } from "../sample/params.ts";
import type { ActiveRequest } from "./active-request.ts";
import type { BeamRow } from "./beam-group.ts";
import { choiceFinished } from "./schedule.ts";
import type { Sequence } from "./sequence.ts";

/**
 * Appends a sampled token to a choice and forwards the events it produces; then, where its
 * grammar forces at least JUMP_MINIMUM tokens, those join it too (jump-forward).
 */
export function deliver(a: ActiveRequest, seq: Sequence, sampled: SampledToken): void {
  for (const e of seq.append(sampled)) a.emit(e);
  for (const e of seq.jumpForward(JUMP_MINIMUM)) a.emit(e);
  if (seq.finished) choiceFinished(a);
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
export function emitPrompt(a: ActiveRequest, vocab: number): void {
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
  // Nothing to generate (scoring): the request ends with its prompt.
  if (a.maxTokens === 0) a.emit({ type: "done" });
}

/** One beam-search step for a request from its live beams' logits rows; KV rows follow their beams. */
export async function advanceBeams(
  a: ActiveRequest,
  logits: Float32Array[],
  kv: KvRows,
  rowOf: (beam: BeamRow) => number,
): Promise<void> {
  const group = a.beams!;
  await group.advance(logits, (moves) => {
    kv.moveRows(moves.map((m) => ({ from: rowOf(m.from), to: rowOf(m.to), length: m.length })));
  });
  if (group.search.done) {
    for (const e of group.results()) a.emit(e);
    a.finishedChoices = a.req.n;
    a.emit({ type: "done" });
  }
}
