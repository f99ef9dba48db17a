/**
 * A parsed request → the engine's request: sampling defaults (request, then the model's
 * generation_config, then vLLM's 1/1/0/0/1), vLLM's greedy rules, and every check that needs the
 * model (token ids against the vocabulary, logprob counts against the server's limit).
 */

import type { EngineRequest, EngineSampling } from "../core/types.ts";
import { invalidRequest } from "../errors.ts";
import type { ChatCompletionRequest } from "./chat-request.ts";

/** Temperatures below this are greedy (vLLM's _SAMPLING_EPS). */
const SAMPLING_EPS = 1e-5;
/** Non-zero temperatures are raised to at least this (vLLM's _MAX_TEMP), so only 0 is greedy. */
const MIN_TEMPERATURE = 1e-2;
/** vLLM's default --max-logprobs. */
export const DEFAULT_MAX_LOGPROBS = 20;

/** Sampling defaults from the model's generation_config.json (absent keys fall back to vLLM's). */
export interface GenerationDefaults {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  repetition_penalty?: number;
}

export interface ToEngineOptions {
  /** The id the engine and the response use (X-Request-Id header or the body's request_id). */
  requestId: string;
  /** The rendered chat prompt (or token ids). */
  prompt: EngineRequest["prompt"];
  vocabSize: number;
  generationDefaults?: GenerationDefaults;
  /** Most logprobs per token a request may ask for; -1: the whole vocabulary. Default 20. */
  maxLogprobs?: number;
}

export function toEngineRequest(req: ChatCompletionRequest, opts: ToEngineOptions): EngineRequest {
  const vocab = opts.vocabSize;
  const gen = opts.generationDefaults ?? {};
  const logprobLimit = opts.maxLogprobs ?? DEFAULT_MAX_LOGPROBS;

  let temperature = req.temperature ?? gen.temperature ?? 1.0;
  if (temperature > 0 && temperature < MIN_TEMPERATURE) temperature = MIN_TEMPERATURE;
  const greedy = temperature < SAMPLING_EPS;
  // Beam search has its own parameters in vLLM, so the greedy n check does not apply to it.
  if (greedy && req.n > 1 && !req.use_beam_search)
    throw invalidRequest(`n must be 1 when using greedy sampling, got ${req.n}.`, "n");

  checkTokenIds(
    "logit_bias",
    req.logit_bias?.map(([id]) => id),
    vocab,
  );
  checkTokenIds("allowed_token_ids", req.allowed_token_ids, vocab);
  checkTokenIds("stop_token_ids", req.stop_token_ids, vocab);

  const sampling: EngineSampling = {
    temperature,
    // Greedy ignores the filters (vLLM resets them).
    topP: greedy ? 1 : (req.top_p ?? gen.top_p ?? 1.0),
    topK: greedy ? 0 : (req.top_k ?? gen.top_k ?? 0),
    minP: greedy ? 0 : (req.min_p ?? gen.min_p ?? 0),
    repetitionPenalty: req.repetition_penalty ?? gen.repetition_penalty ?? 1.0,
    frequencyPenalty: req.frequency_penalty,
    presencePenalty: req.presence_penalty,
    minTokens: req.min_tokens,
    ignoreEos: req.ignore_eos,
    stopTokenIds: req.stop_token_ids,
  };
  if (req.logit_bias?.length) sampling.logitBias = req.logit_bias;
  if (req.allowed_token_ids) sampling.allowedTokenIds = req.allowed_token_ids;
  if (req.bad_words.length) sampling.badWords = req.bad_words;
  // seed -1 means "no seed" (vLLM).
  if (req.seed !== undefined && req.seed !== -1n) sampling.seed = req.seed;

  const engine: EngineRequest = {
    requestId: opts.requestId,
    prompt: opts.prompt,
    n: req.n,
    sampling,
    stop: req.stop,
    includeStopStrInOutput: req.include_stop_str_in_output,
    skipSpecialTokens: req.skip_special_tokens,
    spacesBetweenSpecialTokens: req.spaces_between_special_tokens,
    returnTokensAsTokenIds: req.return_tokens_as_token_ids,
    useBeamSearch: req.use_beam_search,
    lengthPenalty: req.length_penalty,
    priority: req.priority,
  };
  const maxTokens = req.max_completion_tokens ?? req.max_tokens;
  if (maxTokens !== undefined) {
    engine.maxTokens = maxTokens;
    engine.maxTokensField = req.max_completion_tokens !== undefined ? "max_completion_tokens" : "max_tokens";
  }
  if (req.truncate_prompt_tokens !== undefined) engine.truncatePromptTokens = req.truncate_prompt_tokens;
  if (req.logprobs)
    engine.logprobs = logprobCount("top_logprobs", "sample", req.top_logprobs, vocab, logprobLimit);
  if (req.prompt_logprobs !== undefined)
    engine.promptLogprobs = logprobCount(
      "prompt_logprobs",
      "prompt",
      req.prompt_logprobs,
      vocab,
      logprobLimit,
    );
  const rd = req.repetition_detection;
  // max_pattern_size 0 disables detection; min_pattern_size 0 means 1 (vLLM).
  if (rd && rd.max_pattern_size > 0)
    engine.repetitionDetection = {
      minPatternSize: Math.max(rd.min_pattern_size, 1),
      maxPatternSize: rd.max_pattern_size,
      minCount: rd.min_count,
    };
  if (req.cache_salt !== undefined) engine.cacheSalt = req.cache_salt;
  return engine;
}

function checkTokenIds(param: string, ids: readonly number[] | undefined, vocab: number): void {
  const bad = ids?.filter((id) => id < 0 || id >= vocab) ?? [];
  if (bad.length)
    throw invalidRequest(
      `token_id(s) [${bad.join(", ")}] in ${param} contain out-of-vocab token ids. Vocabulary size: ${vocab}`,
      param,
    );
}

/** -1 asks for the whole vocabulary; the count may not exceed the server's limit (vLLM). */
function logprobCount(param: string, kind: string, requested: number, vocab: number, limit: number): number {
  const count = requested === -1 ? vocab : requested;
  const max = limit === -1 ? vocab : limit;
  if (count > max)
    throw invalidRequest(
      `Requested ${kind} logprobs of ${count}, which is greater than max allowed: ${max}`,
      param,
    );
  return count;
}
