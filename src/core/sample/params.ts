/**
 * What the sampler needs to know about one sequence, already validated by the
 * protocol layer, and what it returns per step.
 */
import type { GenerationDefaults } from "../model/model-config.ts";
import type { Seed } from "./ops/rng.ts";

/**
 * logit_bias as two flat arrays (distinct token ids, each one's bias clamped to ±100): a map with a
 * vocabulary's entries crosses the worker boundary and reaches the sampler without an object per entry.
 */
export interface LogitBias {
  ids: number[];
  biases: number[];
}

export interface SamplingParams {
  /** >= 0. 0 = greedy; values in (0, 0.01) are raised to 0.01 (vLLM), so only 0 is greedy. */
  temperature: number;
  /** (0, 1]; 1 = off. */
  topP: number;
  /** 0 or -1 = off. */
  topK: number;
  /** [0, 1]; 0 = off. */
  minP: number;
  /** > 0, 1 = off; applies to tokens seen in the prompt or the output. */
  repetitionPenalty: number;
  /** [-2, 2]; output tokens only, times their count. */
  frequencyPenalty: number;
  /** [-2, 2]; output tokens only, once. */
  presencePenalty: number;
  /** Bias added to each listed token's logit. */
  logitBias?: LogitBias;
  /** When set, every other token is excluded. */
  allowedTokenIds?: readonly number[];
  /** Token sequences; the last token is banned when the output ends with the others. */
  badWordsTokenIds?: readonly (readonly number[])[];
  /** EOS and stop ids are excluded until the output has this many tokens. */
  minTokens: number;
  stopTokenIds: readonly number[];
  eosTokenIds: readonly number[];
  /**
   * Generation continues past EOS. The stop decision lives elsewhere; min_tokens
   * still masks EOS here (vLLM adds EOS to the min_tokens set either way).
   */
  ignoreEos: boolean;
  /** int64 seed of this sequence's random stream; absent = random. */
  seed?: Seed;
  /** undefined = no logprobs; n >= 0 = the chosen token's plus the n most likely alternatives. */
  logprobs?: number;
}

export interface TokenLogprob {
  tokenId: number;
  logprob: number;
}

export interface SampledToken {
  tokenId: number;
  /** Raw log-probability of the chosen token (-inf floored at -9999). Present when logprobs were asked for. */
  logprob?: number;
  /** 1-based rank of the chosen token among the raw logits (ties share the worse rank). */
  rank?: number;
  /** The `logprobs` most likely tokens, most likely first (lower id first on ties). */
  topLogprobs?: TokenLogprob[];
}

/** Every processor off (vLLM's neutral values), plain temperature-1 sampling: a base to override. */
export const NEUTRAL_SAMPLING: Readonly<SamplingParams> = {
  temperature: 1,
  topP: 1,
  topK: 0,
  minP: 0,
  repetitionPenalty: 1,
  frequencyPenalty: 0,
  presencePenalty: 0,
  minTokens: 0,
  stopTokenIds: [],
  eosTokenIds: [],
  ignoreEos: false,
};

/** Temperatures below this mean greedy (vLLM's _SAMPLING_EPS). */
export const SAMPLING_EPS = 1e-5;
/** Smallest non-zero temperature; lower ones are raised to it to keep exp() finite (vLLM's _MAX_TEMP). */
export const MIN_TEMPERATURE = 1e-2;

/** The temperature the sampler actually uses. */
export function effectiveTemperature(temperature: number): number {
  return temperature > 0 && temperature < MIN_TEMPERATURE ? MIN_TEMPERATURE : temperature;
}

/** vLLM's greedy cut-off, on the effective temperature: only 0 is greedy. */
export function isGreedy(temperature: number): boolean {
  return effectiveTemperature(temperature) < SAMPLING_EPS;
}

/**
 * A request's sampling parameters as they cross the worker boundary (structured-clone data): the
 * sampler's own parameters less what the engine derives per sequence (EOS ids, the tokenized bad
 * words, the per-choice seed, the logprob count, which is a request field).
 */
export type RequestSampling = Omit<
  SamplingParams,
  "logitBias" | "badWordsTokenIds" | "eosTokenIds" | "seed" | "logprobs"
> & {
  logitBias?: LogitBias;
  /** Words to ban; tokenized in the worker (with and without a leading space). */
  badWords?: string[];
  /** Choice i uses seed + i. Absent: a random seed per choice. */
  seed?: bigint;
};

/**
 * Fills a request's sampling parameters: the request's value, else the model's
 * generation_config, else vLLM's neutral default. Greedy requests drop the truncation
 * filters (vLLM resets them), and temperatures in (0, 0.01) are raised to 0.01.
 */
export function resolveSampling(
  given: Partial<RequestSampling>,
  defaults: GenerationDefaults = {},
): RequestSampling {
  const temperature = effectiveTemperature(given.temperature ?? defaults.temperature ?? 1.0);
  const greedy = isGreedy(temperature);
  const out: RequestSampling = {
    temperature,
    topP: greedy ? 1 : (given.topP ?? defaults.top_p ?? 1.0),
    topK: greedy ? 0 : (given.topK ?? defaults.top_k ?? 0),
    minP: greedy ? 0 : (given.minP ?? defaults.min_p ?? 0),
    repetitionPenalty: given.repetitionPenalty ?? defaults.repetition_penalty ?? 1.0,
    frequencyPenalty: given.frequencyPenalty ?? 0,
    presencePenalty: given.presencePenalty ?? 0,
    minTokens: given.minTokens ?? 0,
    ignoreEos: given.ignoreEos ?? false,
    stopTokenIds: given.stopTokenIds ?? [],
  };
  if (given.logitBias?.ids.length) out.logitBias = given.logitBias;
  if (given.allowedTokenIds) out.allowedTokenIds = given.allowedTokenIds;
  if (given.badWords?.length) out.badWords = given.badWords;
  if (given.seed !== undefined) out.seed = given.seed;
  return out;
}

/** Throws a RangeError naming the first parameter outside its range; the protocol layer should have caught it. */
export function checkSamplingParams(p: SamplingParams): void {
  const fail = (name: string, value: unknown, range: string) => {
    throw new RangeError(`${name}=${String(value)} must be ${range}`);
  };
  if (!(p.temperature >= 0) || !Number.isFinite(p.temperature)) fail("temperature", p.temperature, ">= 0");
  if (!(p.topP > 0 && p.topP <= 1)) fail("topP", p.topP, "in (0, 1]");
  if (!Number.isInteger(p.topK) || p.topK < -1) fail("topK", p.topK, "an integer >= -1");
  if (!(p.minP >= 0 && p.minP <= 1)) fail("minP", p.minP, "in [0, 1]");
  if (!(p.repetitionPenalty > 0) || !Number.isFinite(p.repetitionPenalty)) {
    fail("repetitionPenalty", p.repetitionPenalty, "> 0");
  }
  if (!(p.frequencyPenalty >= -2 && p.frequencyPenalty <= 2))
    fail("frequencyPenalty", p.frequencyPenalty, "in [-2, 2]");
  if (!(p.presencePenalty >= -2 && p.presencePenalty <= 2))
    fail("presencePenalty", p.presencePenalty, "in [-2, 2]");
  if (!Number.isInteger(p.minTokens) || p.minTokens < 0) fail("minTokens", p.minTokens, "an integer >= 0");
  if (p.logprobs !== undefined && (!Number.isInteger(p.logprobs) || p.logprobs < 0)) {
    fail("logprobs", p.logprobs, "an integer >= 0");
  }
}
