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

/** One live beam's place in the batch: what `EngineCore` treats as a decoding row. */
export class BeamRow {
  readonly group: BeamGroup;
  beamId: number;
  length: number;
  lastToken: number;
  finished = false;

  constructor(group: BeamGroup, beamId: number, length: number, lastToken: number) {
    this.group = group;
    this.beamId = beamId;
    this.length = length;
    this.lastToken = lastToken;
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
  ) {
    this.search = new BeamSearch(promptLength, opts);
    this.ids = new Int32Array(this.search.candidatesPerBeam);
    this.vals = new Float64Array(this.search.candidatesPerBeam);
    this.tokenizer = tokenizer;
    this.skipSpecialTokens = skipSpecialTokens;
  }

  private candidates(logits: Float32Array): BeamCandidate[] {
    return topLogprobs(logits, logSumExp(logits), this.ids, this.vals);
  }

  /**
   * Advances the search with one logits row per live beam (in `rows` order, which is
   * `search.live` order) and re-maps the rows; rows left over are finished.
   */
  advance(logitsPerBeam: Float32Array[], permute: RowPermuter): void {
    const before = new Map(this.rows.map((r) => [r.beamId, r]));
    const live = this.search.step(logitsPerBeam.map((l) => this.candidates(l)));
    if (this.search.done) {
      for (const r of this.rows) r.finished = true;
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
    });
    // Parents' lengths are read before rows are overwritten (all rows share the same length).
    const length = this.rows[0]!.length;
    permute(moves);
    for (const r of next) r.length = length;
    for (const r of this.rows.slice(live.length)) r.finished = true;
    this.rows = next;
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
