/**
 * A parsed request → the engine's request: the wire fields mapped onto the engine's names, the
 * checks that need the model (token ids against the vocabulary, logprob counts against the
 * server's limit); defaults and vLLM's greedy rules are the engine's own (core/request-defaults.ts).
 */

import type { GenerationDefaults } from "../core/model/model-config.ts";
import { completeRequest, type GenerateParams } from "../core/request-defaults.ts";
import { RequestError } from "../core/request-error.ts";
import { checkSupported } from "../core/structured/check-constraint.ts";
import { jsonWhitespace } from "../core/structured/constraint-spec.ts";
import { checkTokenIds } from "../core/token-ids.ts";
import type { EngineRequest } from "../core/types.ts";
import { asApiErrors, invalidRequest } from "../errors.ts";
import type { CHAT_ONLY_FIELDS, ChatCompletionRequest } from "./chat-request.ts";

export type { GenerationDefaults };

/** vLLM's default --max-logprobs. */
export const DEFAULT_MAX_LOGPROBS = 20;

export interface ToEngineOptions {
  /** The id the engine and the response use (X-Request-Id header or the body's request_id). */
  requestId: string;
  /** The rendered chat prompt (or token ids). */
  prompt: EngineRequest["prompt"];
  vocabSize: number;
  generationDefaults?: GenerationDefaults;
  /** Most logprobs per token a request may ask for; -1: the whole vocabulary. Default 20. */
  maxLogprobs?: number;
  /** The model's default for JSON a request leaves unsaid: compact (no whitespace outside strings). */
  compactJson?: boolean;
}

/** The parsed fields every generation route shares (chat-request.ts's table minus the chat-only ones). */
export type SharedFields = Omit<ChatCompletionRequest, (typeof CHAT_ONLY_FIELDS)[number]>;

/** What each route words its own way: the token limit and logprobs per generated token. */
export interface RouteOutput {
  maxTokens?: number;
  maxTokensField?: "max_tokens" | "max_completion_tokens";
  /** Alternatives per generated token, and the field that asked; absent: no logprobs. */
  logprobs?: { count: number; param: string };
  /** Also return the prompt's text and token strings (echo). */
  echoPrompt?: boolean;
}

export function toEngineRequest(req: ChatCompletionRequest, opts: ToEngineOptions): EngineRequest {
  const maxTokens = req.max_completion_tokens ?? req.max_tokens;
  return routeEngineRequest(
    req,
    {
      maxTokens,
      maxTokensField:
        maxTokens === undefined
          ? undefined
          : req.max_completion_tokens !== undefined
            ? "max_completion_tokens"
            : "max_tokens",
      logprobs: req.logprobs ? { count: req.top_logprobs, param: "top_logprobs" } : undefined,
    },
    opts,
  );
}

/** Any route's request: the shared fields plus the route's output options. */
export function routeEngineRequest(
  req: SharedFields,
  output: RouteOutput,
  opts: ToEngineOptions,
): EngineRequest {
  return asApiErrors(() =>
    completeRequest(
      opts.requestId,
      opts.prompt,
      toGenerateParams(req, output, opts),
      opts.generationDefaults,
    ),
  );
}

/** The request's fields under the engine's names; absent fields stay absent for the defaults. */
function toGenerateParams(req: SharedFields, output: RouteOutput, opts: ToEngineOptions): GenerateParams {
  const vocab = opts.vocabSize;
  const logprobLimit = opts.maxLogprobs ?? DEFAULT_MAX_LOGPROBS;
  checkTokenIds("logit_bias", req.logit_bias?.ids, vocab);
  checkTokenIds("allowed_token_ids", req.allowed_token_ids, vocab);
  checkTokenIds("stop_token_ids", req.stop_token_ids, vocab);

  const params: GenerateParams = {
    n: req.n,
    sampling: {
      temperature: req.temperature,
      topP: req.top_p,
      topK: req.top_k,
      minP: req.min_p,
      repetitionPenalty: req.repetition_penalty,
      frequencyPenalty: req.frequency_penalty,
      presencePenalty: req.presence_penalty,
      minTokens: req.min_tokens,
      ignoreEos: req.ignore_eos,
      stopTokenIds: req.stop_token_ids,
      logitBias: req.logit_bias,
      allowedTokenIds: req.allowed_token_ids,
      badWords: req.bad_words,
      // seed -1 means "no seed" (vLLM).
      seed: req.seed === -1n ? undefined : req.seed,
    },
    stop: req.stop,
    includeStopStrInOutput: req.include_stop_str_in_output,
    skipSpecialTokens: req.skip_special_tokens,
    spacesBetweenSpecialTokens: req.spaces_between_special_tokens,
    returnTokensAsTokenIds: req.return_tokens_as_token_ids,
    useBeamSearch: req.use_beam_search,
    lengthPenalty: req.length_penalty,
    priority: req.priority,
    truncatePromptTokens: req.truncate_prompt_tokens,
    cacheSalt: req.cache_salt,
  };
  if (req.constraint) {
    const constraint = jsonWhitespace(req.constraint, opts.compactJson ?? false);
    // The constraint's content is checked here already, so a refusal is a 400 before any work.
    try {
      checkSupported(constraint);
    } catch (err) {
      if (err instanceof RequestError && req.constraint_field === "response_format")
        throw new RequestError(
          err.code,
          err.message.replace(/^structured_outputs\.\w+/, "response_format.json_schema.schema"),
          "response_format.json_schema.schema",
        );
      throw err;
    }
    params.constraint = constraint;
  }
  if (output.maxTokens !== undefined) {
    params.maxTokens = output.maxTokens;
    params.maxTokensField = output.maxTokensField;
  }
  if (output.logprobs)
    params.logprobs = logprobCount(
      output.logprobs.param,
      "sample",
      output.logprobs.count,
      vocab,
      logprobLimit,
    );
  if (output.echoPrompt) params.echoPrompt = true;
  if (req.prompt_logprobs !== undefined)
    params.promptLogprobs = logprobCount(
      "prompt_logprobs",
      "prompt",
      req.prompt_logprobs,
      vocab,
      logprobLimit,
    );
  const rd = req.repetition_detection;
  // max_pattern_size 0 disables detection; min_pattern_size 0 means 1 (vLLM).
  if (rd && rd.max_pattern_size > 0)
    params.repetitionDetection = {
      minPatternSize: Math.max(rd.min_pattern_size, 1),
      maxPatternSize: rd.max_pattern_size,
      minCount: rd.min_count,
    };
  return params;
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
