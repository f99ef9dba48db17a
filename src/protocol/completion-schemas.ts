/** JSON Schemas of the completions route's responses (completion-response.ts, completion-stream.ts). */
import { finishReason, promptLogprobs, stopReason, usageSchema } from "./response-schemas.ts";
import type { JsonSchema } from "./schema.ts";

const int: JsonSchema = { type: "integer" };
const str: JsonSchema = { type: "string" };
const nullable = (schema: JsonSchema): JsonSchema => ({ anyOf: [schema, { type: "null" }] });

const legacyLogprobs: JsonSchema = nullable({
  type: "object",
  description:
    "Parallel lists per token (echoed prompt tokens first): its text, logprob (null for the first prompt token), top alternatives (text → logprob, the token itself included) and character offset in the choice's text.",
  properties: {
    tokens: { type: "array", items: str },
    token_logprobs: { type: "array", items: nullable({ type: "number" }) },
    top_logprobs: {
      type: "array",
      items: nullable({ type: "object", additionalProperties: { type: "number" } }),
    },
    text_offset: { type: "array", items: int },
  },
  required: ["tokens", "token_logprobs", "top_logprobs", "text_offset"],
});

const choiceProperties = {
  index: { ...int, description: "prompt index × n + choice." },
  text: { ...str, description: "With echo, the prompt's text first." },
  logprobs: legacyLogprobs,
  stop_reason: stopReason,
  token_ids: nullable({ type: "array", items: int }),
};

export const completionResponseSchema: JsonSchema = {
  type: "object",
  properties: {
    id: { ...str, description: "cmpl-<request id>" },
    object: { const: "text_completion" },
    created: { ...int, description: "Unix time in seconds." },
    model: str,
    choices: {
      type: "array",
      items: {
        type: "object",
        properties: {
          ...choiceProperties,
          finish_reason: finishReason,
          prompt_logprobs: promptLogprobs,
          prompt_token_ids: nullable({ type: "array", items: int }),
        },
        required: ["index", "text", "logprobs", "finish_reason"],
      },
    },
    service_tier: { type: "null" },
    system_fingerprint: { type: "null" },
    usage: usageSchema,
    kv_transfer_params: nullable({ type: "object" }),
  },
  required: ["id", "object", "created", "model", "choices", "usage"],
};

export const completionChunkSchema: JsonSchema = {
  type: "object",
  properties: {
    id: str,
    object: { const: "text_completion" },
    created: int,
    model: str,
    choices: {
      type: "array",
      description: "One choice per chunk; empty in the final usage chunk.",
      items: {
        type: "object",
        properties: {
          ...choiceProperties,
          finish_reason: nullable(finishReason),
          prompt_token_ids: {
            type: "array",
            items: int,
            description: "On a choice's first chunk, with return_token_ids.",
          },
        },
        required: ["index", "text", "logprobs", "finish_reason"],
      },
    },
    usage: usageSchema,
  },
  required: ["id", "object", "created", "model", "choices"],
  description: "Sent as server-sent events `data: <chunk>`, ended by `data: [DONE]`.",
};
