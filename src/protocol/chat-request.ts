/**
 * The chat completion request: every field of the service spec's request table with vLLM's types,
 * defaults and ranges, parsed into a ChatCompletionRequest that later code consumes as is. Rules
 * that need the model (token ids against the vocabulary, logprob counts, greedy defaults) are
 * applied in to-engine.ts.
 */
import type { LogitBias } from "../core/sample/params.ts";
import type { RequestedConstraint } from "../core/structured/constraint-spec.ts";
import { invalidRequest } from "../errors.ts";
import { type EngineXargValue, engineXargsSchema } from "./engine-xargs.ts";
import { requestObject } from "./json-body.ts";
import { type ChatMessage, messagesSchema } from "./messages.ts";
import {
  cacheSaltSchema,
  logitBiasSchema,
  type RepetitionDetectionParams,
  repetitionDetectionSchema,
  responseFormatSchema,
  SHARED_RULES_DOC,
  type StreamOptions,
  stopSchema,
  streamOptionsSchema,
  structuredOutputsSchema,
  type Tool,
  toolSchema,
} from "./request-fields.ts";
import {
  array,
  boolean,
  documented,
  type Infer,
  int64,
  integer,
  jsonObject,
  literal,
  missingError,
  number,
  object,
  optional,
  refused,
  required,
  string,
  transform,
  valueError,
  withDefault,
} from "./schema.ts";
import { structuredConstraint } from "./structured-outputs.ts";
import {
  checkToolChoice,
  type ToolChoice,
  toolCallConstraint,
  toolChoiceSchema,
} from "./tool-calls/tool-choice.ts";

const nullable = { nullable: true };

/** -1 (as many as fit) or at least 1: 0 would keep no prompt. */
const truncatePromptTokens = documented(
  transform(int64({ minimum: -1n }), (n, path) => {
    if (n === 0n) throw valueError(path, "expected -1 (as many as fit) or at least 1, but got 0 instead.");
    return n;
  }),
  { not: { const: 0 } },
);

// ---- the request table (order and notes follow the service spec) ----

/** The chat request's fields; the completions request shares every field that is not chat-only. */
export const requestShape = {
  messages: required(messagesSchema, { description: "The conversation so far." }),
  model: required(string(), { description: "Model ID (a model, or <model>:step<N> for a checkpoint)." }),
  frequency_penalty: withDefault(number({ minimum: -2, maximum: 2 }), 0, nullable),
  presence_penalty: withDefault(number({ minimum: -2, maximum: 2 }), 0, nullable),
  logit_bias: optional(logitBiasSchema, {
    ...nullable,
    description: "Token id (as a string) → bias added to its logit, clamped to [-100, 100].",
  }),
  logprobs: withDefault(boolean(), false, nullable),
  top_logprobs: withDefault(integer({ minimum: -1 }), 0, {
    ...nullable,
    description:
      "Alternatives per generated token (needs logprobs=true); at most the server's max logprobs (20); -1: the whole vocabulary.",
  }),
  max_tokens: optional(integer({ minimum: 1 }), {
    ...nullable,
    deprecated: true,
    description: "Use max_completion_tokens.",
  }),
  max_completion_tokens: optional(integer({ minimum: 1 }), {
    ...nullable,
    description: "Most tokens to generate per choice; wins over max_tokens. Absent: what the context leaves.",
  }),
  n: withDefault(integer({ minimum: 1 }), 1, nullable),
  response_format: optional(responseFormatSchema, {
    ...nullable,
    description:
      "text, json_object, or json_schema (its schema enforced token by token; objects that leave additionalProperties unset are open, or closed with strict: true); one constraint per request.",
  }),
  seed: optional(int64(), { ...nullable, description: "Choice i samples with seed + i. -1: no seed." }),
  stop: withDefault(stopSchema, [], { ...nullable, description: "Stop strings (none may be empty)." }),
  stream: withDefault(boolean(), false, nullable),
  stream_options: optional(streamOptionsSchema, { ...nullable, description: "Only with stream=true." }),
  temperature: optional(number({ minimum: 0, maximum: 2 }), {
    ...nullable,
    description: "0 is greedy. Absent: the model's generation_config, else 1.",
  }),
  top_p: optional(number({ exclusiveMinimum: 0, maximum: 1 }), nullable),
  tools: optional(array(toolSchema, { minItems: 1 }), {
    ...nullable,
    description: "Tool definitions given to the chat template.",
  }),
  tool_choice: withDefault(toolChoiceSchema, "none", {
    ...nullable,
    description:
      'none: the output is content; every other choice needs tools. auto: tool calls are parsed from it (the model\'s tool parser). required / a named function (one of tools): the output is constrained to valid calls, each tool with parameters of "type": "object" (or none). Servers started with --strict-tool-choice take only none.',
  }),
  reasoning_effort: optional(literal(["low", "medium", "high"]), nullable),
  include_reasoning: withDefault(boolean(), true, {
    description: "Whether the reasoning field is returned in the message.",
  }),
  thinking_token_budget: optional(integer({ minimum: 0 }), {
    ...nullable,
    description:
      "Most tokens a reasoning model (one with a reasoning parser) may sample inside its think block; then `</think>` is forced and the answer follows (vLLM's field). Needs a reasoning model.",
  }),
  parallel_tool_calls: withDefault(boolean(), true, nullable),
  user: optional(string(), nullable),
  use_beam_search: withDefault(boolean(), false),
  top_k: optional(integer({ minimum: -1 }), { ...nullable, description: "0 or -1: off." }),
  min_p: optional(number({ minimum: 0, maximum: 1 }), nullable),
  repetition_penalty: optional(number({ exclusiveMinimum: 0 }), nullable),
  length_penalty: withDefault(number(), 1, { description: "Beam search length penalty." }),
  stop_token_ids: withDefault(array(integer()), [], nullable),
  include_stop_str_in_output: withDefault(boolean(), false),
  ignore_eos: withDefault(boolean(), false),
  min_tokens: withDefault(integer({ minimum: 0 }), 0, {
    description: "EOS and stop_token_ids are suppressed until this many tokens; at most max_tokens.",
  }),
  skip_special_tokens: withDefault(boolean(), true),
  spaces_between_special_tokens: withDefault(boolean(), true),
  truncate_prompt_tokens: optional(truncatePromptTokens, {
    ...nullable,
    description: "Keep the last N prompt tokens; -1: as many as fit.",
  }),
  prompt_logprobs: optional(integer({ minimum: -1 }), {
    ...nullable,
    description:
      "Alternatives per prompt token; at most the server's max logprobs (20); -1: the whole vocabulary. Only 0 with stream.",
  }),
  allowed_token_ids: optional(array(integer(), { minItems: 1 }), nullable),
  bad_words: withDefault(array(string({ minLength: 1 })), []),
  echo: withDefault(boolean(), false, {
    description: "Prepend the last message to the reply when both have the same role.",
  }),
  add_generation_prompt: withDefault(boolean(), true, {
    description: "Add the generation prompt to the chat template.",
  }),
  continue_final_message: withDefault(boolean(), false, {
    description: "Continue the final message (prefill); needs add_generation_prompt=false.",
  }),
  add_special_tokens: withDefault(boolean(), false, {
    description: "Add special tokens such as BOS on top of the template's.",
  }),
  documents: optional(array(jsonObject()), {
    ...nullable,
    description: "Documents for retrieval-augmented generation, each with title and text keys.",
  }),
  chat_template: optional(string(), nullable),
  chat_template_kwargs: optional(jsonObject(), nullable),
  mm_processor_kwargs: optional(refused("the served model is text-only"), {
    ...nullable,
    description: "Only null: the served models are text-only.",
  }),
  structured_outputs: optional(structuredOutputsSchema, {
    ...nullable,
    description:
      "Exactly one of json, regex, choice, grammar, json_object, structural_tag, enforced token by token; what the backend cannot enforce is a 400. Not with a json_object or json_schema response_format.",
  }),
  priority: withDefault(
    transform(int64(), (p) => Number(p)),
    0,
    { description: "Lower is handled earlier; non-zero needs a model with priority scheduling." },
  ),
  // It names the request in logs, usage rows and the X-Request-Id header, so it is kept short.
  request_id: withDefault(string({ maxLength: 256 }), randomRequestId, {
    description: "Generated when absent.",
  }),
  return_tokens_as_token_ids: withDefault(boolean(), false, nullable),
  return_token_ids: withDefault(boolean(), false, nullable),
  cache_salt: optional(cacheSaltSchema, nullable),
  kv_transfer_params: optional(jsonObject(), { ...nullable, description: "Echoed in the response." }),
  engine_xargs: optional(engineXargsSchema, {
    ...nullable,
    description: "Extension parameters (strings, numbers or lists of them). No keys are defined yet.",
  }),
  repetition_detection: optional(repetitionDetectionSchema, nullable),
};

export const chatCompletionRequestSchema = documented(
  object(requestShape, {
    description: "A chat completion request (OpenAI-compatible, with vLLM's extra fields).",
  }),
  // The rules across fields that JSON Schema can state (checkCombinations, checkSharedRules).
  {
    allOf: [
      ...SHARED_RULES_DOC,
      {
        anyOf: [
          { properties: { top_logprobs: { enum: [0, null] } } },
          { properties: { logprobs: { const: true } }, required: ["logprobs"] },
        ],
      },
      {
        anyOf: [
          { properties: { continue_final_message: { const: false } } },
          { properties: { add_generation_prompt: { const: false } }, required: ["add_generation_prompt"] },
        ],
      },
    ],
  },
);

type WireRequest = Infer<typeof chatCompletionRequestSchema>;

/** Fields only the chat route has (its conversation, template and tool fields, its token limits). */
export const CHAT_ONLY_FIELDS = [
  "messages",
  "logprobs",
  "top_logprobs",
  "max_tokens",
  "max_completion_tokens",
  "tools",
  "tool_choice",
  "reasoning_effort",
  "include_reasoning",
  "thinking_token_budget",
  "parallel_tool_calls",
  "echo",
  "add_generation_prompt",
  "continue_final_message",
  "add_special_tokens",
  "documents",
  "chat_template",
  "chat_template_kwargs",
  "mm_processor_kwargs",
] as const;
type ChatOnlyField = (typeof CHAT_ONLY_FIELDS)[number];

function randomRequestId(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

// ---- the parsed request ----

export type { EngineXargValue, RepetitionDetectionParams, StreamOptions, Tool };

/** A validated request. Fields with a default always hold a value; the others may be undefined. */
export interface ChatCompletionRequest {
  messages: ChatMessage[];
  model: string;
  frequency_penalty: number;
  presence_penalty: number;
  /** Token ids and their biases, clamped to ±100; ids are checked against the vocabulary later. */
  logit_bias?: LogitBias;
  logprobs: boolean;
  top_logprobs: number;
  max_tokens?: number;
  max_completion_tokens?: number;
  n: number;
  seed?: bigint;
  stop: string[];
  stream: boolean;
  stream_options?: StreamOptions;
  temperature?: number;
  top_p?: number;
  tools?: Tool[];
  tool_choice: ToolChoice;
  reasoning_effort?: "low" | "medium" | "high";
  include_reasoning: boolean;
  thinking_token_budget?: number;
  parallel_tool_calls: boolean;
  user?: string;
  use_beam_search: boolean;
  top_k?: number;
  min_p?: number;
  repetition_penalty?: number;
  length_penalty: number;
  /** Deduplicated, in request order. */
  stop_token_ids: number[];
  include_stop_str_in_output: boolean;
  ignore_eos: boolean;
  min_tokens: number;
  skip_special_tokens: boolean;
  spaces_between_special_tokens: boolean;
  /** -1 or >= 0; values beyond 2^53 are capped there (far beyond any context). */
  truncate_prompt_tokens?: number;
  prompt_logprobs?: number;
  allowed_token_ids?: number[];
  /** Deduplicated, in request order. */
  bad_words: string[];
  echo: boolean;
  add_generation_prompt: boolean;
  continue_final_message: boolean;
  add_special_tokens: boolean;
  documents?: Record<string, unknown>[];
  chat_template?: string;
  chat_template_kwargs?: Record<string, unknown>;
  priority: number;
  request_id: string;
  return_tokens_as_token_ids: boolean;
  return_token_ids: boolean;
  cache_salt?: string;
  kv_transfer_params?: Record<string, unknown>;
  engine_xargs?: Record<string, EngineXargValue>;
  repetition_detection?: RepetitionDetectionParams;
  /** From structured_outputs or response_format (named by constraint_field, for errors). */
  constraint?: RequestedConstraint;
  constraint_field?: "structured_outputs" | "response_format" | "tool_choice";
}

/**
 * Parses a chat completion request body, throwing an ApiError (400) naming the first bad field.
 * Pass the raw body text when available: integers beyond 2^53 (seed, truncate_prompt_tokens,
 * priority) are then read exactly instead of as JSON.parse rounded them.
 */
export function parseChatCompletionRequest(body: unknown, rawText?: string): ChatCompletionRequest {
  const wire = chatCompletionRequestSchema.parse(requestObject(body, rawText), "");
  checkCombinations(wire);
  return toParsed(wire);
}

/** Rules across fields, and fields whose feature this server does not have (never ignored). */
function checkCombinations(r: WireRequest): void {
  if ((r.top_logprobs === -1 || r.top_logprobs > 0) && !r.logprobs)
    throw invalidRequest("When using top_logprobs, logprobs must be set to true.", "top_logprobs");
  if (r.continue_final_message && r.add_generation_prompt)
    throw invalidRequest(
      "Cannot set both continue_final_message and add_generation_prompt to true; set add_generation_prompt to false to continue the final message.",
      "continue_final_message",
    );
  checkToolChoice(r.tool_choice, r.tools);
  checkSharedRules(r, r.max_completion_tokens ?? r.max_tokens);
}

/** The fields of the request table every generation route has (chat-only ones left out). */
export type SharedWire = Omit<WireRequest, ChatOnlyField>;

/** The rules of the shared fields, for any generation route; `maxTokens` is the route's limit. */
export function checkSharedRules(r: SharedWire, maxTokens: number | undefined): void {
  if (r.model === undefined) throw missingError("model");
  if (r.stream_options !== undefined && !r.stream)
    throw invalidRequest("stream_options can only be set when stream is true.", "stream_options");
  if (r.prompt_logprobs !== undefined && r.stream && r.prompt_logprobs !== 0)
    throw invalidRequest("prompt_logprobs are not available when stream is true.", "prompt_logprobs");
  if (maxTokens !== undefined && r.min_tokens > maxTokens)
    throw invalidRequest(
      `min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${r.min_tokens}.`,
      "min_tokens",
    );
  // response_format and structured_outputs are checked where they become the constraint
  // (structuredConstraint, in sharedParsed).
}

function toParsed(r: WireRequest): ChatCompletionRequest {
  const { mm_processor_kwargs: _mm, ...rest } = r;
  const parsed = sharedParsed(rest);
  const forced = toolCallConstraint(r.tool_choice, r.tools, r.parallel_tool_calls);
  if (forced) {
    if (parsed.constraint)
      throw invalidRequest(
        `tool_choice ${typeof r.tool_choice === "string" ? `"${r.tool_choice}"` : "naming a function"} constrains the output and cannot be combined with ${parsed.constraint_field}.`,
        "tool_choice",
      );
    parsed.constraint = forced;
    parsed.constraint_field = "tool_choice";
  }
  return parsed;
}

/** Wire values → parsed ones for the shared fields (the rest passes through as is). */
export function sharedParsed<W extends SharedWire>(
  r: W,
): Omit<W, "model" | "seed" | "truncate_prompt_tokens" | "response_format" | "structured_outputs"> &
  Pick<
    ChatCompletionRequest,
    "model" | "seed" | "truncate_prompt_tokens" | "constraint" | "constraint_field"
  > {
  const {
    model,
    seed,
    truncate_prompt_tokens,
    stop_token_ids,
    bad_words,
    response_format: _rf,
    structured_outputs: _so,
    ...rest
  } = r;
  const parsed = {
    model: model!,
    ...rest,
    stop_token_ids: [...new Set(stop_token_ids)],
    bad_words: [...new Set(bad_words)],
  } as ReturnType<typeof sharedParsed<W>>;
  const constraint = structuredConstraint(r.structured_outputs, r.response_format);
  if (constraint) {
    parsed.constraint = constraint;
    parsed.constraint_field = r.structured_outputs ? "structured_outputs" : "response_format";
  }
  if (seed !== undefined) parsed.seed = seed;
  if (truncate_prompt_tokens !== undefined)
    parsed.truncate_prompt_tokens =
      truncate_prompt_tokens > BigInt(Number.MAX_SAFE_INTEGER)
        ? Number.MAX_SAFE_INTEGER
        : Number(truncate_prompt_tokens);
  return parsed;
}
