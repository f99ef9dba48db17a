/**
 * The constrain stage: between the forward pass and sampling, every sequence with a token
 * constraint fills its row of an allowed-token bitmask (bit i set = token i may be sampled), as
 * vLLM's structured-output manager fills the grammar bitmask between execute_model and
 * sample_tokens. The sampler applies the mask before anything else (raw logprobs included, as
 * vLLM's raw logprobs are computed from the masked logits).
 * Structured outputs plug in by implementing TokenConstraint (src/core/structured/); sequences
 * without one are unmasked.
 */
import type { SequenceRow } from "./active-request.ts";
import type { StepPlan } from "./plan.ts";

export interface TokenConstraint {
  /** Sets the bits of the tokens allowed next; `mask` arrives cleared. */
  fillMask(mask: Uint32Array): Promise<void>;
  /** Advances past the token that was sampled; false when the constraint refuses it. */
  accept(tokenId: number): boolean;
  /** Nothing more may follow (a stop token was accepted in an accepting state). */
  readonly terminated?: boolean;
  /** Frees what the constraint holds once its sequence has finished. */
  release?(): void;
  /**
   * Jump-forward: the tokens the constraint forces next, already accepted (none when fewer than
   * `minimum` would be; at most `limit`).
   */
  forcedTokens?(encode: (text: string) => number[], minimum: number, limit: number): number[];
  /** Back to the state before any token (beam search replays a beam's tokens into a free row). */
  reset?(): void;
}

/** 32-bit words in one sequence's mask. */
export function maskWords(vocabSize: number): number {
  return Math.ceil(vocabSize / 32);
}

/** Reusable mask rows, so a step allocates nothing. */
export class MaskRows {
  private readonly words: number;
  private readonly rows: Uint32Array[] = [];

  constructor(vocabSize: number) {
    this.words = maskWords(vocabSize);
  }

  /**
   * One mask per sequence, in order; undefined for sequences without a constraint. Masks may be
   * computed asynchronously (the engine builds them while the forward pass runs).
   */
  async build(
    sequences: readonly { readonly constraint?: TokenConstraint }[],
  ): Promise<(Uint32Array | undefined)[]> {
    let used = 0;
    const out: (Uint32Array | undefined)[] = [];
    for (const s of sequences) {
      if (!s.constraint) {
        out.push(undefined);
        continue;
      }
      if (used === this.rows.length) this.rows.push(new Uint32Array(this.words));
      const row = this.rows[used++]!;
      row.fill(0);
      await s.constraint.fillMask(row);
      out.push(row);
    }
    return out;
  }
}

/**
 * The constrain stage of a step: the mask of every choice that samples from this step's logits
 * (decoding choices, and every choice of a prompt the step completes), while the pass runs.
 * Beams mask their own candidates (BeamGroup). A failing mask fails the step, after the pass.
 */
export async function constrain(
  plan: StepPlan,
  masks: MaskRows,
  pass: Promise<unknown>,
): Promise<Map<SequenceRow, Uint32Array>> {
  const sampling: SequenceRow[] = [];
  for (const run of plan.runs) {
    const a = run.request;
    if (a.beams) continue;
    if (run.row) {
      if (!run.row.finished && run.row.constraint) sampling.push(run.row);
    } else if (run.completesPrompt && a.maxTokens > 0) sampling.push(...a.sequences);
  }
  const out = new Map<SequenceRow, Uint32Array>();
  if (!sampling.some((s) => s.constraint)) return out;
  try {
    const rows = await masks.build(sampling);
    sampling.forEach((s, i) => {
      if (rows[i]) out.set(s, rows[i]);
    });
    return out;
  } catch (err) {
    // The pass's own failure, if any, is reported by the step's await of it; not twice.
    pass.catch(() => {});
    throw err;
  }
}
