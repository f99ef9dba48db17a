/**
 * Beam search bookkeeping as vLLM does it, independent of the model: each
 * step, every live beam is extended by its candidate tokens (vLLM asks for the
 * 2 * beamWidth most likely plus the sampled one); EOS extensions become
 * finished, the rest are ranked by score and the best beamWidth stay live.
 * After maxTokens steps, live and finished beams compete on score together.
 * Beams are known by id only; the caller maps ids to KV-cache slots (each new
 * live beam forks its parent's slot).
 */
import type { SampledToken } from "./params.ts";

/**
 * vLLM's get_beam_search_score: cumulative logprob / length^lengthPenalty,
 * where length counts the prompt and drops a final EOS.
 */
export function beamScore(
  cumulativeLogprob: number,
  seqLen: number,
  eosTokenId: number,
  lastTokenId: number | undefined,
  lengthPenalty: number,
): number {
  const length = lastTokenId === eosTokenId ? seqLen - 1 : seqLen;
  return cumulativeLogprob / length ** lengthPenalty;
}

export interface BeamCandidate {
  tokenId: number;
  logprob: number;
}

/** A step's expansion candidates from a sampler result: the sampled token first, then the alternatives not already listed (vLLM's logprob dict order). */
export function beamCandidates(sampled: SampledToken): BeamCandidate[] {
  const out: BeamCandidate[] = [];
  const seen = new Set<number>();
  if (sampled.logprob !== undefined) {
    out.push({ tokenId: sampled.tokenId, logprob: sampled.logprob });
    seen.add(sampled.tokenId);
  }
  for (const alt of sampled.topLogprobs ?? []) {
    if (!seen.has(alt.tokenId)) {
      seen.add(alt.tokenId);
      out.push(alt);
    }
  }
  return out;
}

export interface BeamSearchOptions {
  beamWidth: number;
  maxTokens: number;
  eosTokenId: number;
  /** Default 1. */
  lengthPenalty?: number;
  /** EOS is then an ordinary token and never finishes a beam. */
  ignoreEos?: boolean;
  /** Keep the EOS in a finished beam's tokens (it never counts towards length). */
  includeStopStrInOutput?: boolean;
}

export interface LiveBeam {
  id: number;
  /** The beam this one extends (its KV cache is the starting point); undefined for the root. */
  parentId: number | undefined;
  /** Output tokens, prompt excluded. */
  tokenIds: readonly number[];
  cumulativeLogprob: number;
}

export interface FinishedBeam {
  tokenIds: readonly number[];
  cumulativeLogprob: number;
  score: number;
  finishReason: "stop" | "length";
  /** The EOS id for "stop". */
  stopReason?: number;
}

interface Scored<T> {
  beam: T;
  score: number;
}

export class BeamSearch {
  readonly beamWidth: number;
  /** Candidates to request per live beam and step (vLLM asks for 2 * beamWidth logprobs). */
  readonly candidatesPerBeam: number;
  readonly #promptLength: number;
  readonly #opts: Required<BeamSearchOptions>;
  #live: LiveBeam[];
  #finished: Scored<FinishedBeam>[] = [];
  #steps = 0;
  #nextId = 1;

  constructor(promptLength: number, options: BeamSearchOptions) {
    if (!Number.isInteger(options.beamWidth) || options.beamWidth < 1) {
      throw new RangeError(`beamWidth=${options.beamWidth} must be an integer >= 1`);
    }
    this.#opts = { lengthPenalty: 1, ignoreEos: false, includeStopStrInOutput: false, ...options };
    this.beamWidth = options.beamWidth;
    this.candidatesPerBeam = 2 * options.beamWidth;
    this.#promptLength = promptLength;
    this.#live =
      options.maxTokens > 0 ? [{ id: 0, parentId: undefined, tokenIds: [], cumulativeLogprob: 0 }] : [];
  }

  /** Beams to run through the model next, in order. */
  get live(): readonly LiveBeam[] {
    return this.#live;
  }

  /** True once maxTokens steps ran or no beam is left to extend. */
  get done(): boolean {
    return this.#live.length === 0 || this.#steps >= this.#opts.maxTokens;
  }

  #score(tokenIds: readonly number[], cumulativeLogprob: number): number {
    const { eosTokenId, lengthPenalty } = this.#opts;
    const last = tokenIds.length > 0 ? tokenIds[tokenIds.length - 1] : undefined;
    return beamScore(
      cumulativeLogprob,
      this.#promptLength + tokenIds.length,
      eosTokenId,
      last,
      lengthPenalty,
    );
  }

  /**
   * Extends the live beams: `candidates[i]` lists the next-token candidates of
   * `live[i]`. Returns the new live beams (best first).
   */
  step(candidates: readonly (readonly BeamCandidate[])[]): readonly LiveBeam[] {
    if (this.done) throw new Error("beam search is already done");
    if (candidates.length !== this.#live.length) {
      throw new RangeError(`${candidates.length} candidate lists for ${this.#live.length} live beams`);
    }
    const { eosTokenId, ignoreEos, includeStopStrInOutput } = this.#opts;
    const extended: Scored<LiveBeam>[] = [];
    this.#live.forEach((beam, i) => {
      for (const { tokenId, logprob } of candidates[i]) {
        const cumulativeLogprob = beam.cumulativeLogprob + logprob;
        const tokenIds = [...beam.tokenIds, tokenId];
        if (tokenId === eosTokenId && !ignoreEos) {
          const kept = includeStopStrInOutput ? tokenIds : beam.tokenIds;
          const score = this.#score(tokenIds, cumulativeLogprob);
          this.#finished.push({
            beam: { tokenIds: kept, cumulativeLogprob, score, finishReason: "stop", stopReason: eosTokenId },
            score,
          });
        } else {
          const next = { id: -1, parentId: beam.id, tokenIds, cumulativeLogprob };
          extended.push({ beam: next, score: this.#score(tokenIds, cumulativeLogprob) });
        }
      }
    });
    // Array.prototype.sort is stable, like Python's sorted(): equal scores keep expansion order.
    extended.sort((a, b) => b.score - a.score);
    this.#live = extended.slice(0, this.beamWidth).map(({ beam }) => ({ ...beam, id: this.#nextId++ }));
    this.#steps++;
    return this.#live;
  }

  /** The best beamWidth of finished and still-live beams (the latter finish with "length"), best first. */
  results(): FinishedBeam[] {
    const all: Scored<FinishedBeam>[] = [...this.#finished];
    for (const beam of this.#live) {
      const score = this.#score(beam.tokenIds, beam.cumulativeLogprob);
      all.push({
        beam: {
          tokenIds: beam.tokenIds,
          cumulativeLogprob: beam.cumulativeLogprob,
          score,
          finishReason: "length",
        },
        score,
      });
    }
    all.sort((a, b) => b.score - a.score);
    return all.slice(0, this.beamWidth).map(({ beam }) => beam);
  }
}
