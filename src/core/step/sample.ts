/**
 * The sample stage of a step: every live choice's next token from its run's logits row and mask
 * (a prompt the step completes gives each of its choices their first token from its last
 * position), and each beam search's logits rows, which the update stage advances it with. Choices
 * and beams are told apart by their request, never by the row's class.
 */
import type { StepOutput } from "../runner/batch-runner.ts";
import type { SampledToken } from "../sample/params.ts";
import type { ActiveRequest, SequenceRow } from "./active-request.ts";
import type { StepPlan } from "./plan.ts";
import type { Sequence } from "./sequence.ts";

export interface SampledChoice {
  request: ActiveRequest;
  seq: Sequence;
  token: SampledToken;
  /** The choice's first token, from the prompt this step completed. */
  first: boolean;
}

export interface Sampled {
  /** Each choice's token this step, in the plan's order. */
  tokens: SampledChoice[];
  /** Each beam search that advances: one logits row per live beam, in the group's row order. */
  beams: Map<ActiveRequest, Float32Array[]>;
  /** Each prompt chunk's logits of every position, where the request asks for them. */
  promptRows: Map<ActiveRequest, Float32Array>;
  vocab: number;
}

export function sample(plan: StepPlan, out: StepOutput, masks: Map<SequenceRow, Uint32Array>): Sampled {
  const sampled: Sampled = { tokens: [], beams: new Map(), promptRows: new Map(), vocab: out.vocab };
  const beamRows = new Map<SequenceRow, Float32Array>();
  plan.runs.forEach((run, i) => {
    const a = run.request;
    const logits = out.logits[i];
    if (!logits) return;
    if (!run.row) {
      if (run.logits === "all") sampled.promptRows.set(a, logits);
      if (!run.completesPrompt || a.maxTokens === 0) return;
      const last = logits.subarray(logits.length - out.vocab);
      // The first beam step expands the root beam alone; every choice samples from the prompt's last logits.
      if (a.beams) sampled.beams.set(a, [last]);
      else
        for (const seq of a.sequences)
          sampled.tokens.push({ request: a, seq, token: seq.sample(last, masks.get(seq)), first: true });
      return;
    }
    if (a.aborted || run.row.finished) return;
    if (a.beams) beamRows.set(run.row, logits);
    else {
      const seq = a.sequences.find((s) => s === run.row)!;
      sampled.tokens.push({ request: a, seq, token: seq.sample(logits, masks.get(seq)), first: false });
    }
  });
  for (const run of plan.runs) {
    const group = run.row && run.request.beams;
    if (!group || sampled.beams.has(run.request) || !beamRows.has(run.row!)) continue;
    sampled.beams.set(
      run.request,
      group.rows.map((b) => beamRows.get(b)!),
    );
  }
  return sampled;
}
