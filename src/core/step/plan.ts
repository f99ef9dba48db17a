/**
 * A step's plan: what the scheduler decided, as plain data. Per row of work — a decoding choice or
 * beam, or a prompt being prefilled — the position it starts at, the tokens to compute and whether
 * its logits are kept; plus the KV layout work the runner's BatchLayout applies just before the
 * pass (admitted prompts and their cached prefix blocks, forks, beam copies, prefix saves). The
 * scheduler never touches the KV cache: it says what, the layout decides where.
 */
import type { LayoutPlan, PassRun } from "../runner/batch-layout.ts";
import type { ActiveRequest, SequenceRow } from "./active-request.ts";

/** One request's work this step. */
export interface ScheduledRun extends PassRun {
  request: ActiveRequest;
  /** The decoding row (choice or beam) these tokens extend; absent for a prompt chunk (slot = request). */
  row?: SequenceRow;
  /** A prompt chunk that completes its prompt: its choices sample their first tokens from it. */
  completesPrompt: boolean;
}

export interface StepPlan extends LayoutPlan {
  /** Decoding rows first (one or more tokens each: the last sampled, then jump-forward ones), then prompt chunks. */
  runs: readonly ScheduledRun[];
}
