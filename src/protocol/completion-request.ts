/**
 * The legacy completion request (POST /v1/completions) with vLLM's semantics: one or more prompts
 * (text or token ids), echo, integer logprobs, max_tokens 0 with echo for scoring. Every field it
 * shares with the chat request comes from chat-request.ts's table, so both routes validate them
 * the same way; only the completion fields are defined here.
 */
import { invalidRequest, unsupportedField } from "../errors.ts";
import {
  CHAT_ONLY_FIELDS,
  requestShape as chatRequestShape,
  checkSharedRules,
  sharedParsed,
} from "./chat-request.ts";
import { requestObject } from "./json-body.ts";
import { SHARED_RULES_DOC } from "./request-fields.ts";
import {
  array,
  boolean,
  documented,
  type Infer,
  indexPath,
  integer,
  object,
  optional,
  refused,
  required,
  type Schema,
  typeError,
  valueError,
  withDefault,
} from "./schema.ts";
import type { SharedFields } from "./to-engine.ts";

const nullable = { nullable: true };

/** vLLM's (and OpenAI's) default max_tokens for completions. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;

/** One prompt of a completion request; each gets its own choices. */
export type CompletionPrompt = { text: string } | { tokenIds: number[] };

const tokenIds = array(integer({ minimum: 0 }), { minItems: 1 });

/** A string, an array of strings, an array of token ids, or an array of token-id arrays. */
export const promptSchema: Schema<CompletionPrompt[]> = {
  parse(value, path) {
    if (typeof value === "string") return [{ text: nonEmpty(value, path) }];
    if (!Array.isArray(value)) throw typeError(path, "a string or an array", value);
    if (value.length === 0) throw valueError(path, "expected at least one prompt.");
    const first = value[0];
    if (typeof first === "string")
      return value.map((v, i) => {
        const p = indexPath(path, i);
        if (typeof v !== "string") throw typeError(p, "a string", v);
        return { text: nonEmpty(v, p) };
      });
    if (Array.isArray(first))
      return value.map((v, i) => ({ tokenIds: tokenIds.parse(v, indexPath(path, i)) }));
    return [{ tokenIds: tokenIds.parse(value, path) }];
  },
  jsonSchema: () => ({
    anyOf: [
      { type: "string", minLength: 1 },
      { type: "array", items: { type: "string", minLength: 1 }, minItems: 1 },
      tokenIds.jsonSchema(),
      { type: "array", items: tokenIds.jsonSchema(), minItems: 1 },
    ],
  }),
};

function nonEmpty(text: string, path: string): string {
  if (text === "") throw valueError(path, "a prompt must not be empty.");
  return text;
}

function omit<T extends object, K extends keyof T>(o: T, keys: readonly K[]): Omit<T, K> {
  const out = { ...o };
  for (const k of keys) delete out[k];
  return out;
}

const completionShape = {
  prompt: required(promptSchema, {
    description:
      "A string, an array of strings, token ids, or an array of token-id arrays; each prompt gets n choices.",
  }),
  ...omit(chatRequestShape, CHAT_ONLY_FIELDS),
  best_of: optional(integer({ minimum: 1 }), {
    ...nullable,
    description: "Only equal to n is served (every generated sequence is returned).",
  }),
  echo: withDefault(boolean(), false, {
    ...nullable,
    description: "Return the prompt before the completion (with logprobs: the prompt's tokens first).",
  }),
  logprobs: optional(integer({ minimum: -1 }), {
    ...nullable,
    description:
      "Alternatives per token in the legacy shape (tokens, token_logprobs, top_logprobs, text_offset); at most the server's max logprobs (20); -1: the whole vocabulary.",
  }),
  max_tokens: optional(integer({ minimum: 0 }), {
    ...nullable,
    description: `Most tokens to generate per choice (default ${DEFAULT_COMPLETION_MAX_TOKENS}; null: what the context leaves). 0 only with echo: score the prompt.`,
  }),
  suffix: optional(refused("the served models cannot insert text before a suffix"), {
    ...nullable,
    description: "Only null: the served models do not insert.",
  }),
  add_special_tokens: withDefault(boolean(), true, {
    description: "Add the tokenizer's special tokens (such as BOS) to text prompts.",
  }),
};

export const completionRequestSchema = documented(
  object(completionShape, {
    description: "A completion request (OpenAI legacy completions, with vLLM's extra fields).",
  }),
  // The rules across fields that JSON Schema can state: the shared ones, and max_tokens 0 (which
  // scores the prompt) only with echo (checkCompletionRules).
  {
    allOf: [
      ...SHARED_RULES_DOC,
      {
        anyOf: [
          { properties: { max_tokens: { not: { const: 0 } } } },
          { properties: { echo: { const: true } }, required: ["echo"] },
        ],
      },
    ],
  },
);

type WireCompletion = Infer<typeof completionRequestSchema>;

/** A validated completion request: the shared fields (chat-request.ts) plus its own. */
export interface CompletionRequest extends SharedFields {
  prompts: CompletionPrompt[];
  echo: boolean;
  /** Alternatives per token (legacy logprobs); undefined: no logprobs. */
  logprobs?: number;
  /** Undefined: what the context leaves (an explicit null). */
  max_tokens?: number;
  add_special_tokens: boolean;
}

/** Parses a completion request body, throwing an ApiError (400) naming the first bad field. */
export function parseCompletionRequest(body: unknown, rawText?: string): CompletionRequest {
  const object = requestObject(body, rawText);
  const wire = completionRequestSchema.parse(object, "");
  // Absent is the default; an explicit null is "as many as the context leaves" (vLLM).
  const maxTokens = Object.hasOwn(object, "max_tokens") ? wire.max_tokens : DEFAULT_COMPLETION_MAX_TOKENS;
  checkCompletionRules(wire, maxTokens);
  const { prompt, best_of: _bestOf, suffix: _suffix, max_tokens: _max, ...rest } = wire;
  const parsed: CompletionRequest = { ...sharedParsed(rest), prompts: prompt };
  if (maxTokens !== undefined) parsed.max_tokens = maxTokens;
  return parsed;
}

function checkCompletionRules(r: WireCompletion, maxTokens: number | undefined): void {
  if (maxTokens === 0 && !r.echo)
    throw invalidRequest(
      "max_tokens must be at least 1, got 0 (0 is only allowed with echo=true, to score the prompt).",
      "max_tokens",
    );
  if (r.best_of !== undefined) {
    if (r.best_of < r.n)
      throw invalidRequest(
        `best_of must be greater than or equal to n, got n=${r.n} and best_of=${r.best_of}.`,
        "best_of",
      );
    if (r.best_of > r.n)
      throw unsupportedField(
        "best_of",
        `only best_of equal to n (${r.n}) is served; generating ${r.best_of} and returning the best ${r.n} is not`,
      );
  }
  checkSharedRules(r, maxTokens);
}
