/**
 * JSON Schemas of the Messages routes' responses, stream events and errors, for the OpenAPI
 * document (src/protocol/openapi.ts). They describe what messages-response.ts, messages-stream.ts
 * and errors.ts build.
 */
import type { JsonSchema } from "../schema.ts";

const str = { type: "string" };
const count = { type: "integer", minimum: 0 };

const closed = (properties: Record<string, unknown>, extra: JsonSchema = {}): JsonSchema => ({
  type: "object",
  properties,
  required: Object.keys(properties),
  additionalProperties: false,
  ...extra,
});

const textBlock = closed({ type: { const: "text" }, text: str });
const toolUseBlock = closed({ type: { const: "tool_use" }, id: str, name: str, input: { type: "object" } });

export const messagesUsageSchema = closed({
  input_tokens: count,
  output_tokens: count,
  cache_creation_input_tokens: count,
  cache_read_input_tokens: count,
});

const stopReasons = ["end_turn", "max_tokens", "stop_sequence", "tool_use"];

export const anthropicMessageSchema = closed(
  {
    id: { type: "string", pattern: "^msg_" },
    type: { const: "message" },
    role: { const: "assistant" },
    model: str,
    content: { type: "array", items: { anyOf: [textBlock, toolUseBlock] } },
    stop_reason: { enum: stopReasons },
    stop_sequence: { type: ["string", "null"] },
    usage: messagesUsageSchema,
  },
  { description: "A Messages API response." },
);

export const messagesStreamEventSchema: JsonSchema = {
  description: "One event of a Messages stream; the SSE event name is its type.",
  anyOf: [
    closed({
      type: { const: "message_start" },
      message: {
        ...anthropicMessageSchema,
        properties: {
          ...(anthropicMessageSchema.properties as object),
          content: { type: "array", maxItems: 0 },
          stop_reason: { type: "null" },
        },
      },
    }),
    closed({ type: { const: "ping" } }),
    closed({
      type: { const: "content_block_start" },
      index: count,
      content_block: { anyOf: [textBlock, toolUseBlock] },
    }),
    closed({
      type: { const: "content_block_delta" },
      index: count,
      delta: {
        anyOf: [
          closed({ type: { const: "text_delta" }, text: str }),
          closed({ type: { const: "input_json_delta" }, partial_json: str }),
        ],
      },
    }),
    closed({ type: { const: "content_block_stop" }, index: count }),
    closed({
      type: { const: "message_delta" },
      delta: closed({ stop_reason: { enum: stopReasons }, stop_sequence: { type: ["string", "null"] } }),
      usage: closed({ output_tokens: count }),
    }),
    closed({ type: { const: "message_stop" } }),
  ],
};

export const anthropicErrorSchema = closed(
  {
    type: { const: "error" },
    error: closed({
      type: {
        enum: [
          "invalid_request_error",
          "authentication_error",
          "permission_error",
          "not_found_error",
          "request_too_large",
          "rate_limit_error",
          "api_error",
          "overloaded_error",
        ],
      },
      message: str,
    }),
  },
  { description: "Anthropic's error body (the Messages routes)." },
);

export const countTokensResponseSchema = closed({ input_tokens: count });
