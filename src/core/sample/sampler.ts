/**
 * SequenceSampler: picks one sequence's next token from a row of model logits,
 * with vLLM's sampling semantics. State is per sequence (parameters, prompt
 * tokens, its own random stream), so a seeded request draws the same tokens
 * whatever else shares the batch.
 *
 * Stages, in execution order (the code below keeps this order):
 *  0. structured-output bitmask: vLLM applies the grammar mask to the model's
 *     logits before its sampler runs, so the raw logprobs already see it
 *  1. raw logprobs: log_softmax of that row, before any other processing
 *     (vLLM's default "raw_logprobs"); gathered after the draw
 *  2. allowed_token_ids: every other token → -inf
 *  3. bad words: ban a word's last token when the output ends with the rest
 *  4. min_tokens: EOS and stop ids → -inf until enough output tokens
 *  5. logit_bias
 *  6. penalties: repetition (prompt + output), frequency, presence (output)
 *  7. greedy shortcut (temperature 0): argmax, lowest id on ties
 *  8. temperature: scales min_p's threshold and the softmax weights (no pass
 *     divides the row)
 *  9. min_p
 * 10. top_k
 * 11. top_p
 * 12. draw with this sequence's RNG: inverse CDF over the kept tokens, one
 *     uniform per token (vLLM draws exponential noise instead; same distribution)
 * 13. gather logprobs of the chosen token (value, rank) and the top alternatives
 *
 * The model's row is never modified: stages 0 and 2-6 write to scratch copies,
 * and only when they have something to do, so greedy without logprobs or
 * processing is a single argmax pass over the caller's row.
 */

import { outOfVocab } from "../token-ids.ts";
import { banBadWords } from "./ops/bad-words.ts";
import { type Candidates, draw, drawDense, topP, truncate } from "./ops/candidates.ts";
import { logSumExp, rankOf, toLogprob, topLogprobs } from "./ops/logprobs.ts";
import { addLogitBias, applyBitmask, banTokens, copyAllowed } from "./ops/masks.ts";
import { applyPenalties, type Penalties, type PromptTokens, promptTokens } from "./ops/penalties.ts";
import { randomSeed, Xoshiro128 } from "./ops/rng.ts";
import { argmax } from "./ops/select.ts";
import {
  checkSamplingParams,
  effectiveTemperature,
  isGreedy,
  type SampledToken,
  type SamplingParams,
  type TokenLogprob,
} from "./params.ts";
import { type SamplerScratch, sharedScratch } from "./scratch.ts";
import { warmUp } from "./warm-up.ts";

export class SequenceSampler {
  readonly vocabSize: number;
  readonly #scratch: SamplerScratch;
  readonly #rng: Xoshiro128;

  readonly #greedy: boolean;
  readonly #temperature: number;
  readonly #minP: number;
  readonly #topK: number;
  readonly #topP: number;
  readonly #logprobs: number | undefined;
  readonly #topIds: Int32Array;
  readonly #topValues: Float64Array;

  readonly #allowed: Int32Array | undefined;
  readonly #badWords: readonly (readonly number[])[] | undefined;
  readonly #minTokens: number;
  readonly #minTokensIds: Int32Array;
  readonly #biasIds: Int32Array | undefined;
  readonly #biasValues: Float32Array | undefined;
  readonly #penalties: Penalties | undefined;
  readonly #prompt: PromptTokens | undefined;

  /** `scratch` defaults to this thread's shared buffers for the vocabulary size. */
  constructor(
    params: SamplingParams,
    vocabSize: number,
    promptTokenIds: readonly number[],
    scratch: SamplerScratch = sharedScratch(vocabSize),
  ) {
    checkSamplingParams(params);
    if (!Number.isInteger(vocabSize) || vocabSize <= 0)
      throw new RangeError(`vocabSize=${vocabSize} is invalid`);
    this.vocabSize = vocabSize;
    this.#scratch = scratch;
    this.#rng = new Xoshiro128(params.seed ?? randomSeed());

    this.#temperature = effectiveTemperature(params.temperature);
    this.#greedy = isGreedy(params.temperature);
    // Greedy ignores the truncation filters (vLLM resets them); top_k >= vocab keeps everything.
    this.#minP = this.#greedy ? 0 : params.minP;
    this.#topK = this.#greedy || params.topK <= 0 || params.topK >= vocabSize ? 0 : params.topK;
    this.#topP = this.#greedy ? 1 : params.topP;

    this.#logprobs = params.logprobs === undefined ? undefined : Math.min(params.logprobs, vocabSize);
    this.#topIds = new Int32Array(this.#logprobs ?? 0);
    this.#topValues = new Float64Array(this.#logprobs ?? 0);

    const inVocab = (what: string, id: number) => {
      if (outOfVocab([id], vocabSize).length)
        throw new RangeError(`${what} token id ${id} is outside the vocabulary [0, ${vocabSize})`);
      return id;
    };
    this.#allowed = params.allowedTokenIds
      ? Int32Array.from(params.allowedTokenIds, (id) => inVocab("allowed", id))
      : undefined;
    const words = params.badWordsTokenIds?.filter((w) => w.length > 0);
    for (const w of words ?? []) for (const id of w) inVocab("bad word", id);
    this.#badWords = words?.length ? words : undefined;

    this.#minTokens = params.minTokens;
    const stopIds = new Set([...params.eosTokenIds, ...params.stopTokenIds]);
    // An id the model cannot emit needs no mask.
    this.#minTokensIds = Int32Array.from(
      [...stopIds].filter((id) => Number.isInteger(id) && id >= 0 && id < vocabSize),
    );

    if (params.logitBias?.ids.length) {
      this.#biasIds = Int32Array.from(params.logitBias.ids, (id) => inVocab("logit_bias", id));
      this.#biasValues = Float32Array.from(params.logitBias.biases);
    }

    const penalties: Penalties = {
      repetition: params.repetitionPenalty,
      frequency: params.frequencyPenalty,
      presence: params.presencePenalty,
    };
    if (penalties.repetition !== 1 || penalties.frequency !== 0 || penalties.presence !== 0) {
      this.#penalties = penalties;
      // Only the repetition penalty looks at the prompt.
      this.#prompt = promptTokens(penalties.repetition !== 1 ? promptTokenIds : [], vocabSize);
    }
  }

  /**
   * Samples the next token from one row of raw model logits (length =
   * vocabSize; left unmodified). `outputTokenIds` are the tokens generated so
   * far for this sequence; `mask` is an optional structured-output bitmask
   * (bit i set = token i allowed).
   */
  sample(logits: Float32Array, outputTokenIds: readonly number[], mask?: Uint32Array): SampledToken {
    const vocab = this.vocabSize;
    if (logits.length !== vocab)
      throw new RangeError(`logits row has ${logits.length} entries, expected ${vocab}`);
    const s = this.#scratch;

    // 0. Structured-output bitmask.
    let raw = logits;
    if (mask) {
      raw = s.raw;
      raw.set(logits);
      applyBitmask(raw, mask);
    }

    // 1. Raw logprobs (normaliser now; values gathered in stage 13).
    const lse = this.#logprobs === undefined ? 0 : logSumExp(raw);

    let row = raw;
    const minTokensActive = outputTokenIds.length < this.#minTokens && this.#minTokensIds.length > 0;
    const penaltiesActive =
      this.#penalties !== undefined && (this.#prompt!.ids.length > 0 || outputTokenIds.length > 0);
    if (this.#allowed || this.#badWords || minTokensActive || this.#biasIds || penaltiesActive) {
      row = s.work;
      // 2. allowed_token_ids.
      if (this.#allowed) copyAllowed(row, raw, this.#allowed);
      else row.set(raw);
      // 3. Bad words.
      if (this.#badWords) banBadWords(row, this.#badWords, outputTokenIds);
      // 4. min_tokens.
      if (minTokensActive) banTokens(row, this.#minTokensIds);
      // 5. logit_bias.
      if (this.#biasIds) addLogitBias(row, this.#biasIds, this.#biasValues!);
      // 6. Penalties.
      if (penaltiesActive) applyPenalties(row, this.#prompt!, outputTokenIds, s.counts, this.#penalties!);
    }

    // 7. Greedy shortcut; otherwise 8-12.
    let tokenId = this.#greedy ? argmax(row) : this.#sampleRandom(row);
    // Every token excluded (contradictory constraints): the structured-output mask wins (its best
    // allowed token), else the model's own favourite.
    if (tokenId < 0 && mask) tokenId = argmax(raw);
    if (tokenId < 0) tokenId = Math.max(argmax(logits), 0);

    // 13. Logprobs.
    if (this.#logprobs === undefined) return { tokenId };
    return this.#withLogprobs(tokenId, raw, lse);
  }

  #sampleRandom(row: Float32Array): number {
    const c: Candidates = this.#scratch.candidates;
    // Temperature alone (stages 8 and 12): no filter to gather candidates for.
    if (this.#minP === 0 && this.#topK === 0 && this.#topP === 1) {
      return drawDense(row, this.vocabSize, this.#temperature, this.#rng.nextDouble(), c);
    }
    // 8. Temperature, 9. min_p, 10. top_k: one pass keeps the survivors with their softmax weights;
    // the row itself is never divided.
    let total = truncate(row, this.vocabSize, this.#temperature, this.#minP, this.#topK, this.#topP, c);
    // 11. top_p, over the softmax of what is left.
    if (this.#topP < 1) total = topP(c, this.#topP, total);
    // 12. Draw: one uniform per token, even when a single candidate is left, so streams stay aligned.
    return draw(c, total, this.#rng.nextDouble());
  }

  #withLogprobs(tokenId: number, raw: Float32Array, lse: number): SampledToken {
    const ids = this.#topIds;
    const values = this.#topValues;
    const top: TokenLogprob[] = topLogprobs(raw, lse, ids, values);
    const n = top.length;
    // Above the last listed value, everything ranked at or before the token is in the list.
    const value = raw[tokenId];
    let rank: number;
    if (n > 0 && value > values[n - 1]) {
      rank = 0;
      while (rank < n && values[rank] >= value) rank++;
    } else rank = rankOf(raw, tokenId);
    return { tokenId, logprob: toLogprob(value, lse), rank, topLogprobs: top };
  }
}

// Type feedback for every path before the first full-size call; see warm-up.ts.
warmUp(SequenceSampler);
