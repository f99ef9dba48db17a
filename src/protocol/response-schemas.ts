/**
 * JSON Schemas of what the service returns, for the OpenAPI document. They describe the objects
 * built in response.ts and stream.ts (chat), the HTTP layer (models, health) and
 * models/checkpoints.ts (checkpoint list).
 */
import type { JsonSchema } from "./schema.ts";

const int: JsonSchema = { type: "integer" };
const str: JsonSchema = { type: "string" };
const nullable = (schema: JsonSchema): JsonSchema => ({ anyOf: [schema, { type: "null" }] });
const obj = (properties: JsonSchema, required: string[] = Object.keys(properties)): JsonSchema => ({
  type: "object",
  properties,
  required,
});

const topLogprob = obj({ token: str, logprob: { type: "number" }, bytes: { type: "array", items: int } });

const choiceLogprobs = obj({
  content: {
    type: "array",
    items: obj({
      ...(topLogprob.properties as JsonSchema),
      top_logprobs: { type: "array", items: topLogprob },
    }),
  },
});

export const usageSchema: JsonSchema = obj(
  {
    prompt_tokens: { ...int, default: 0 },
    completion_tokens: { ...int, default: 0 },
    total_tokens: { ...int, default: 0 },
    prompt_tokens_details: obj({ cached_tokens: int }),
    completion_tokens_details: {
      ...obj({ reasoning_tokens: int }),
      description:
        "Chat: completion tokens inside a reasoning model's think block, its tags included (0 for a model without a reasoning parser). Absent on completions.",
    },
  },
  ["prompt_tokens", "completion_tokens", "total_tokens"],
);

export const finishReason: JsonSchema = {
  type: "string",
  enum: ["stop", "length", "repetition", "abort"],
  description:
    "stop: EOS, a stop string or a stop token; length: max tokens or the context; repetition: repetition_detection.",
};

/** Chat adds tool_calls: the model stopped after calling tools (parsed by the model's tool parser). */
const chatFinishReason: JsonSchema = {
  ...finishReason,
  enum: [...(finishReason.enum as string[]), "tool_calls"],
};

const toolCallDelta = obj(
  {
    index: int,
    id: str,
    type: { const: "function" },
    function: obj({ name: str, arguments: str }, ["arguments"]),
  },
  ["index", "function"],
);

export const stopReason: JsonSchema = {
  anyOf: [int, str, { type: "null" }],
  description: 'The stop token id, the matched stop string, "repetition_detected", or null (EOS or length).',
};

const reasoningText = {
  ...str,
  description: "A reasoning model's think block (its ortserve.json names a reasoning_parser).",
};

const message = obj(
  {
    role: str,
    content: nullable(str),
    refusal: nullable(str),
    annotations: nullable({ type: "array", items: { type: "object" } }),
    audio: nullable(obj({ id: str, data: str, transcript: str, expires_at: int })),
    function_call: nullable(obj({ name: str, arguments: str })),
    tool_calls: {
      type: "array",
      items: obj({ id: str, type: { const: "function" }, function: obj({ name: str, arguments: str }) }),
    },
    reasoning: nullable(reasoningText),
    reasoning_content: {
      ...nullable(str),
      description: "Alias of reasoning, sent by reasoning models only.",
    },
  },
  ["role", "content", "refusal", "annotations", "audio", "function_call", "tool_calls", "reasoning"],
);

export const promptLogprobs: JsonSchema = nullable({
  type: "array",
  description: "Aligned with the prompt tokens; the first entry is null.",
  items: nullable({
    type: "object",
    description: "Token id → its logprob, rank and text.",
    additionalProperties: obj({ logprob: { type: "number" }, rank: int, decoded_token: str }),
  }),
});

export const chatCompletionResponseSchema: JsonSchema = obj(
  {
    id: { ...str, description: "chatcmpl-<request id>" },
    object: { const: "chat.completion" },
    created: { ...int, description: "Unix time in seconds." },
    model: str,
    choices: {
      type: "array",
      items: obj({
        index: int,
        message,
        logprobs: nullable(choiceLogprobs),
        finish_reason: chatFinishReason,
        stop_reason: stopReason,
        token_ids: nullable({ type: "array", items: int }),
      }),
    },
    service_tier: nullable({ type: "string", enum: ["auto", "default", "flex", "scale", "priority"] }),
    system_fingerprint: nullable(str),
    usage: usageSchema,
    prompt_logprobs: promptLogprobs,
    prompt_token_ids: nullable({ type: "array", items: int }),
    kv_transfer_params: nullable({ type: "object" }),
  },
  ["model", "choices", "usage"],
);

export const chatCompletionChunkSchema: JsonSchema = {
  ...obj(
    {
      id: str,
      object: { const: "chat.completion.chunk" },
      created: int,
      model: str,
      choices: {
        type: "array",
        description: "One choice per chunk; empty in the final usage chunk.",
        items: obj(
          {
            index: int,
            delta: obj(
              {
                role: str,
                content: str,
                reasoning: reasoningText,
                reasoning_content: { ...str, description: "Alias of reasoning." },
                tool_calls: { type: "array", items: toolCallDelta },
              },
              [],
            ),
            logprobs: nullable(choiceLogprobs),
            finish_reason: nullable(chatFinishReason),
            stop_reason: stopReason,
            token_ids: nullable({ type: "array", items: int }),
          },
          ["index", "delta", "logprobs", "finish_reason"],
        ),
      },
      usage: usageSchema,
      prompt_token_ids: {
        type: "array",
        items: int,
        description: "Only in the first chunk, with return_token_ids.",
      },
    },
    ["id", "object", "created", "model", "choices"],
  ),
  description:
    'Sent as server-sent events `data: <chunk>`, ended by `data: [DONE]`. An error after the stream started is sent as `data: {"error": {...}}` before [DONE].',
};

export const modelListSchema: JsonSchema = obj({
  object: { const: "list" },
  data: {
    type: "array",
    items: obj(
      {
        id: { ...str, description: "A model, or a checkpoint as <model>:step<N>." },
        object: { const: "model" },
        created: int,
        owned_by: str,
        parent: { ...str, description: "For a checkpoint: its model." },
      },
      ["id", "object", "created", "owned_by"],
    ),
  },
});

export const checkpointListSchema: JsonSchema = obj(
  {
    object: { const: "list", default: "list" },
    data: {
      type: "array",
      items: obj({ id: { ...str, format: "uuid" }, step: int, metrics: { type: "object" } }),
    },
    has_more: { type: "boolean", description: "True when more items are available." },
    first_id: { ...str, default: "", description: "ID of the first item of the page." },
    last_id: { ...str, default: "", description: "ID of the last item of the page." },
  },
  ["data", "has_more"],
);

export const healthSchema: JsonSchema = obj({ status: { type: "string", enum: ["ok", "draining"] } });

export const errorSchema: JsonSchema = obj({
  error: obj({
    message: str,
    type: {
      type: "string",
      enum: [
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "server_error",
        "service_unavailable_error",
        "requests",
        "tokens",
      ],
    },
    param: {
      ...nullable(str),
      description: "The request field to blame, with its path (messages[2].content).",
    },
    code: nullable(str),
  }),
});
