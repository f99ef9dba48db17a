/**
 * The engine's request and event types: the only things that cross the worker boundary (plain
 * structured-clone data, no wire-format knowledge). The protocol layer builds an EngineRequest from
 * a validated HTTP request and turns EngineEvents into responses or stream chunks.
 */

import { KV_DTYPES, type KvDtype } from "./runner/kv-rows.ts";
import type { RequestSampling } from "./sample/params.ts";
import type { RepetitionDetection } from "./sample/repetition.ts";
import type { StructuredConstraint } from "./structured/constraint-spec.ts";

export type { RepetitionDetection, RequestSampling, StructuredConstraint };

export interface EngineRequest {
  requestId: string;
  /** Rendered chat text (tokenized in the worker) or token ids. */
  prompt: { text: string; addSpecialTokens: boolean } | { tokenIds: number[] };
  /** Keep the last N prompt tokens; -1: as many as fit with the requested output. */
  truncatePromptTokens?: number;
  /** Undefined: what remains of the context. */
  maxTokens?: number;
  /** The request field maxTokens came from, for error messages. */
  maxTokensField?: "max_tokens" | "max_completion_tokens";
  /** The operator's per-request token limits (not a request field); a request beyond one fails. */
  limits?: TokenLimits;
  n: number;
  sampling: RequestSampling;
  stop: string[];
  includeStopStrInOutput: boolean;
  skipSpecialTokens: boolean;
  spacesBetweenSpecialTokens: boolean;
  /** Number of top alternatives per generated token; undefined = no logprobs. */
  logprobs?: number;
  /** Number of top alternatives per prompt token; undefined = none. */
  promptLogprobs?: number;
  /** Also return the raw logits of every prompt position (rows × vocab) with the prompt event. */
  promptLogits?: boolean;
  /** Also return the prompt's text and each prompt token's string with the prompt event (echo). */
  echoPrompt?: boolean;
  returnTokensAsTokenIds: boolean;
  useBeamSearch: boolean;
  lengthPenalty: number;
  repetitionDetection?: RepetitionDetection;
  priority: number;
  /**
   * Whose share of admission the request counts against (the caller's API key and project; not a
   * request field): with fair share on, admission alternates between shares of equal priority.
   */
  shareKey?: string;
  cacheSalt?: string;
  /** Structured output: every choice's tokens are limited to this grammar. */
  constraint?: StructuredConstraint;
  /**
   * A reasoning model's think block (the model has a reasoning parser): whether the prompt opened
   * it, and a budget of tokens it may use before its close is forced.
   */
  reasoning?: ReasoningSpec;
}

export interface ReasoningSpec {
  opened: boolean;
  budget?: {
    /** Tokens the model may sample inside the block. */
    tokens: number;
    /** Forced, as the model's tokenizer spells it, once they are spent: `</think>` and what follows it. */
    closeText: string;
  };
}

export interface TokenLimits {
  /** Most prompt tokens (after truncation). */
  maxPromptTokens?: number;
  /** Most prompt plus completion tokens; a request without max_tokens gets what remains of it. */
  maxTotalTokens?: number;
}

export interface TokenLogprob {
  tokenId: number;
  token: string;
  logprob: number;
  bytes: number[];
  top: { tokenId: number; token: string; logprob: number; bytes: number[] }[];
}

export interface PromptTokenLogprob {
  /** Keyed by token id: the prompt token itself plus the top alternatives. */
  entries: { tokenId: number; logprob: number; rank: number; token: string }[];
}

export interface PromptEcho {
  /** The request's own text when the model saw all of it; else the decoded prompt tokens. */
  text: string;
  /** Per prompt token, its string as logprob entries spell it ("token_id:<id>" when asked). */
  tokens: string[];
}

export type FinishReason = "stop" | "length" | "repetition" | "abort";

export type EngineEvent =
  /** First event: the prompt as the model saw it. */
  | {
      type: "prompt";
      promptTokenIds: number[];
      cachedTokens: number;
      /** Milliseconds the request waited in the engine's queue for a free row before admission. */
      queueMs: number;
      /** Aligned with the prompt; the first entry is null. */
      promptLogprobs?: (PromptTokenLogprob | null)[];
      /** With `promptLogits`: row i holds the logits after prompt token i (rows × vocab). */
      promptLogits?: Float32Array;
      /** With `echoPrompt`: the prompt's text and each prompt token's logprob string. */
      echo?: PromptEcho;
    }
  | { type: "delta"; choice: number; tokenIds: number[]; text: string; logprobs?: TokenLogprob[] }
  | {
      type: "finish";
      choice: number;
      finishReason: FinishReason;
      /** Stop token id, matched stop string, "repetition_detected", or null (EOS, length). */
      stopReason: number | string | null;
      completionTokens: number;
      /** Output tokens inside a reasoning model's think block, tags included (with `reasoning`). */
      reasoningTokens?: number;
    }
  | { type: "done" }
  | { type: "error"; code: EngineErrorCode; message: string; param?: string };

export type EngineErrorCode =
  /** The request cannot be served as asked (prompt too long, bad token ids...): a 400. */
  | "invalid_request"
  /** A priority on an fcfs model: a 400. */
  | "priority_not_supported"
  /** The worker died or the engine failed: a 500. */
  | "engine_failure"
  /** The server is shutting down. */
  | "unavailable";

/** What `--kv-cache-dtype` takes: a cache element type, or the weight format's own ("auto"). */
export type KvCacheDtypeSetting = "auto" | KvDtype;
export const KV_CACHE_DTYPE_SETTINGS: readonly KvCacheDtypeSetting[] = ["auto", ...KV_DTYPES];

export interface EngineCoreConfig {
  modelDir: string;
  /**
   * modelDir's revision as the registry scanned it: a model pulled again at the same path loads as
   * another engine, and the old one is freed once its requests finish.
   */
  revision?: string;
  format: "q4" | "fp32";
  schedulingPolicy: "fcfs" | "priority";
  /** Most sequences decoded together (rows of the KV cache). */
  maxNumSeqs: number;
  /** Context limit enforced per sequence (at most the model's). */
  maxModelLen: number;
  /** Prompt tokens prefilled per step (shared by its prompts), so running streams keep moving during long prompts. */
  prefillChunk: number;
  /** Bytes the prefix cache may hold. */
  prefixCacheBytes: number;
  intraOpThreads: number;
  /**
   * The KV cache's element type; "auto": the weight format's (float16 for q4, float32 for fp32).
   * float16 and int8 need the native session.
   */
  kvCacheDtype: KvCacheDtypeSetting;
  /** Structured outputs: text the grammar forces joins the output without sampling (jump-forward). */
  jumpForward: boolean;
  /** Milliseconds a new structured-output constraint may take to compile (0: no budget). */
  grammarCompileTimeoutMs: number;
  /** Admission alternates between callers' shares (EngineRequest.shareKey) of equal priority. */
  fairShare: boolean;
}
