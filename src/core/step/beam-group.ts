/**
 * Beam search for one request, as vLLM's OpenAI server runs it: every step each live beam is
 * extended by its 2 × beam_width most likely next tokens (raw log-probabilities), the best
 * beam_width by length-penalised score stay live, beams ending on EOS finish. Each live beam owns a
 * KV row; after a step the new beams take over the rows, each starting from its parent's KV.
 * The best beam_width beams become the choices, each delivered whole when the search ends.
 */

import type { TokenizerLike } from "../output/tokenizer-like.ts";
import { type BeamCandidate, BeamSearch } from "../sample/beam-search.ts";
import { logSumExp, topLogprobs } from "../sample/ops/logprobs.ts";
import type { EngineEvent } from "../types.ts";
import type { SequenceRow } from "./active-request.ts";
import type { TokenConstraint } from "./constrain.ts";

/** One live beam's place in the batch: a decoding row, as a choice's Sequence is. */
export class BeamRow implements SequenceRow {
  readonly group: BeamGroup;
  beamId: number;
  length: number;
  lastToken: number;
  finished = false;
  /** Structured outputs: the grammar state of the beam this row holds. */
  readonly constraint?: TokenConstraint;

  constructor(
    group: BeamGroup,
    beamId: number,
    length: number,
    lastToken: number,
    constraint?: TokenConstraint,
  ) {
    this.group = group;
    this.beamId = beamId;
    this.length = length;
    this.lastToken = lastToken;
    this.constraint = constraint;
  }

  nextTokens(): number[] {
    return [this.lastToken];
  }

  computed(count: number): void {
    this.length += count;
  }
}

/** How the group moves KV rows: copy `length` positions of every (from → to) pair, parents read first. */
export type RowPermuter = (moves: { from: BeamRow; to: BeamRow; length: number }[]) => void;

export class BeamGroup {
  readonly search: BeamSearch;
  rows: BeamRow[] = [];
  private readonly ids: Int32Array;
  private readonly vals: Float64Array;
  private readonly tokenizer: TokenizerLike;
  private readonly skipSpecialTokens: boolean;
  /** Structured outputs: one constraint per row (beam_width of them), else undefined. */
  readonly constraints: TokenConstraint[] | undefined;
  /** Stop tokens other than the search's EOS: a constrained beam may not end on them. */
  private readonly otherStops: number[];
  private mask: Uint32Array | undefined;

  constructor(
    promptLength: number,
    opts: {
      beamWidth: number;
      maxTokens: number;
      eosTokenId: number;
      lengthPenalty: number;
      ignoreEos: boolean;
      includeStopStrInOutput: boolean;
    },
    tokenizer: TokenizerLike,
    skipSpecialTokens: boolean,
    constraints?: { perRow: TokenConstraint[]; stopTokenIds: readonly number[] },
  ) {
    this.search = new BeamSearch(promptLength, opts);
    this.constraints = constraints?.perRow;
    this.otherStops = (constraints?.stopTokenIds ?? []).filter((t) => t !== opts.eosTokenId);
    this.ids = new Int32Array(this.search.candidatesPerBeam);
    this.vals = new Float64Array(this.search.candidatesPerBeam);
    this.tokenizer = tokenizer;
    this.skipSpecialTokens = skipSpecialTokens;
  }

  /** The rows once the prompt is in the cache: the prompt's row is the root beam (id 0), the others copies to be. */
  openRows(promptLength: number): BeamRow[] {
    this.rows = Array.from(
      { length: this.search.beamWidth },
      (_, i) => new BeamRow(this, i === 0 ? 0 : -1, promptLength, -1, this.constraints?.[i]),
    );
    return this.rows;
  }

  private candidates(logits: Float32Array): BeamCandidate[] {
    return topLogprobs(logits, logSumExp(logits), this.ids, this.vals);
  }

  /**
   * The row's logits with every token its grammar refuses at -inf, so beams only grow inside the
   * language (their scores are log-probabilities over the allowed tokens, as a constrained
   * sample's raw logprobs are).
   */
  private async masked(logits: Float32Array, constraint: TokenConstraint): Promise<Float32Array> {
    this.mask ??= new Uint32Array(Math.ceil(logits.length / 32));
    this.mask.fill(0);
    await constraint.fillMask(this.mask);
    for (const t of this.otherStops) if (t < logits.length) this.mask[t >>> 5]! &= ~(1 << (t & 31));
    const out = logits.slice();
    for (let i = 0; i < out.length; i++)
      if ((this.mask[i >>> 5]! & (1 << (i & 31))) === 0) out[i] = -Infinity;
    return out;
  }

  /**
   * Advances the search with one logits row per live beam (in `rows` order, which is
   * `search.live` order) and re-maps the rows; rows left over are finished.
   */
  async advance(logitsPerBeam: Float32Array[], permute: RowPermuter): Promise<void> {
    const before = new Map(this.rows.map((r) => [r.beamId, r]));
    const candidates: BeamCandidate[][] = [];
    for (const [i, logits] of logitsPerBeam.entries()) {
      const constraint = this.rows[i]!.constraint;
      candidates.push(this.candidates(constraint ? await this.masked(logits, constraint) : logits));
    }
    const live = this.search.step(candidates);
    if (this.search.done) {
      for (const r of this.rows) r.finished = true;
      this.release();
      return;
    }
    const moves: { from: BeamRow; to: BeamRow; length: number }[] = [];
    const next: BeamRow[] = [];
    live.forEach((beam, i) => {
      const parent = before.get(beam.parentId!)!;
      const row = this.rows[i]!;
      moves.push({ from: parent, to: row, length: parent.length });
      next.push(row);
      row.beamId = beam.id;
      row.lastToken = beam.tokenIds.at(-1)!;
      if (row.constraint) {
        // A row that continues its own beam takes one more token; one that receives another
        // beam's copy replays that beam's tokens.
        if (parent === row) row.constraint.accept(row.lastToken);
        else {
          row.constraint.reset?.();
          for (const t of beam.tokenIds) row.constraint.accept(t);
        }
      }
    });
    // Parents' lengths are read before rows are overwritten (all rows share the same length).
    const length = this.rows[0]!.length;
    permute(moves);
    for (const r of next) r.length = length;
    for (const r of this.rows.slice(live.length)) r.finished = true;
    this.rows = next;
  }

  /** Frees the rows' constraints (the search is over or abandoned). */
  release(): void {
    for (const c of this.constraints ?? []) c.release?.();
  }

  /** The choices once the search is done: one delta with the beam's whole text, then its finish. */
  results(): EngineEvent[] {
    return this.search.results().flatMap((beam, choice): EngineEvent[] => [
      {
        type: "delta",
        choice,
        tokenIds: [...beam.tokenIds],
        text: this.tokenizer.decode([...beam.tokenIds], { skipSpecialTokens: this.skipSpecialTokens }),
      },
      {
        type: "finish",
        choice,
        finishReason: beam.finishReason,
        // vLLM reports no stop_reason for a beam ended by EOS.
        stopReason: null,
        completionTokens: beam.tokenIds.length,
      },
    ]);
  }
}
