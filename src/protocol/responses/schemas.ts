/**
 * JSON Schemas of the Responses routes' answers and stream events, for the OpenAPI document
 * (src/protocol/openapi.ts). They describe what response.ts, stream.ts and the stored-response
 * routes build; errors are the catalogue's OpenAI error body.
 */
import type { JsonSchema } from "../schema.ts";

const str = { type: "string" };
const count = { type: "integer", minimum: 0 };
const nullable = (schema: JsonSchema): JsonSchema => ({ anyOf: [schema, { type: "null" }] });

const closed = (properties: Record<string, unknown>, extra: JsonSchema = {}): JsonSchema => ({
  type: "object",
  properties,
  required: Object.keys(properties),
  additionalProperties: false,
  ...extra,
});

const topLogprob = closed({
  token: str,
  logprob: { type: "number" },
  bytes: { type: "array", items: { type: "integer" } },
});
const logprobs = {
  type: "array",
  items: closed({ ...(topLogprob.properties as object), top_logprobs: { type: "array", items: topLogprob } }),
  description: "Each token's logprob, with include message.output_text.logprobs; otherwise empty.",
};

const itemStatus = { enum: ["in_progress", "completed", "incomplete"] };

const outputText = closed({
  type: { const: "output_text" },
  text: str,
  annotations: { type: "array", maxItems: 0 },
  logprobs,
});

const outputMessage = closed({
  id: { type: "string", pattern: "^msg_" },
  type: { const: "message" },
  status: itemStatus,
  role: { const: "assistant" },
  content: { type: "array", items: outputText },
});

const functionCall = closed({
  id: { type: "string", pattern: "^fc_" },
  type: { const: "function_call" },
  status: itemStatus,
  call_id: str,
  name: str,
  arguments: str,
});

const reasoningText = closed({ type: { const: "reasoning_text" }, text: str });

const reasoning = closed(
  {
    id: { type: "string", pattern: "^rs_" },
    type: { const: "reasoning" },
    status: itemStatus,
    summary: { type: "array", maxItems: 0 },
    content: { type: "array", items: reasoningText },
  },
  { description: "A reasoning model's think block (its ortserve.json names a reasoning_parser)." },
);

const outputItem = { anyOf: [reasoning, outputMessage, functionCall] };

export const responsesUsageSchema = closed({
  input_tokens: count,
  input_tokens_details: closed({ cached_tokens: count, cache_write_tokens: count }),
  output_tokens: count,
  output_tokens_details: closed({ reasoning_tokens: count }),
  total_tokens: count,
});

const textFormat = {
  anyOf: [
    closed({ type: { enum: ["text", "json_object"] } }),
    {
      type: "object",
      properties: {
        type: { const: "json_schema" },
        name: str,
        schema: { type: "object" },
        description: str,
        strict: { type: "boolean" },
      },
      required: ["type", "name", "schema"],
      additionalProperties: false,
    },
  ],
};

export const responseObjectSchema = closed(
  {
    id: { type: "string", pattern: "^resp_" },
    object: { const: "response" },
    created_at: count,
    status: { enum: ["in_progress", "completed", "incomplete"] },
    background: { const: false },
    completed_at: nullable(count),
    error: { type: "null" },
    incomplete_details: nullable(closed({ reason: { const: "max_output_tokens" } })),
    instructions: nullable(str),
    max_output_tokens: nullable(count),
    max_tool_calls: { type: "null" },
    model: str,
    output: { type: "array", items: outputItem },
    parallel_tool_calls: { type: "boolean" },
    previous_response_id: nullable(str),
    prompt_cache_key: nullable(str),
    reasoning: closed({ effort: nullable(str), summary: { type: "null" } }),
    safety_identifier: nullable(str),
    service_tier: { const: "default" },
    store: { type: "boolean" },
    temperature: nullable({ type: "number" }),
    text: closed({ format: textFormat, verbosity: { type: "null" } }),
    tool_choice: {
      anyOf: [{ enum: ["none", "auto", "required"] }, closed({ type: { const: "function" }, name: str })],
    },
    tools: {
      type: "array",
      items: closed({
        type: { const: "function" },
        name: str,
        description: nullable(str),
        parameters: nullable({ type: "object" }),
        strict: nullable({ type: "boolean" }),
      }),
    },
    top_logprobs: { type: "integer", minimum: 0, maximum: 20 },
    top_p: nullable({ type: "number" }),
    truncation: { enum: ["disabled", "auto"] },
    usage: nullable(responsesUsageSchema),
    user: nullable(str),
    metadata: { type: "object", additionalProperties: str },
  },
  {
    description:
      "A Responses API response (output_text is the SDKs' own convenience, assembled from output).",
  },
);

const seq = { sequence_number: count };
const at = { output_index: count };
const inPart = { item_id: str, output_index: count, content_index: count };

export const responsesStreamEventSchema: JsonSchema = {
  description: "One event of a Responses stream; the SSE event name is its type.",
  anyOf: [
    closed({
      type: {
        enum: ["response.created", "response.in_progress", "response.completed", "response.incomplete"],
      },
      response: responseObjectSchema,
      ...seq,
    }),
    closed({
      type: { enum: ["response.output_item.added", "response.output_item.done"] },
      item: outputItem,
      ...at,
      ...seq,
    }),
    closed({
      type: { enum: ["response.content_part.added", "response.content_part.done"] },
      part: { anyOf: [outputText, reasoningText] },
      ...inPart,
      ...seq,
    }),
    closed({
      type: { const: "response.output_text.delta" },
      delta: str,
      logprobs,
      ...inPart,
      ...seq,
    }),
    closed({
      type: { const: "response.output_text.done" },
      text: str,
      logprobs,
      ...inPart,
      ...seq,
    }),
    closed({ type: { const: "response.reasoning_text.delta" }, delta: str, ...inPart, ...seq }),
    closed({ type: { const: "response.reasoning_text.done" }, text: str, ...inPart, ...seq }),
    closed({
      type: { const: "response.function_call_arguments.delta" },
      delta: str,
      item_id: str,
      ...at,
      ...seq,
    }),
    closed({
      type: { const: "response.function_call_arguments.done" },
      arguments: str,
      item_id: str,
      ...at,
      ...seq,
    }),
    closed({ type: { const: "error" }, code: nullable(str), message: str, param: nullable(str), ...seq }),
  ],
};

const inputText = closed({ type: { const: "input_text" }, text: str });
const storedOutputText = closed({
  type: { const: "output_text" },
  text: str,
  annotations: { type: "array" },
});
const refusal = closed({ type: { const: "refusal" }, refusal: str });
const completed = { const: "completed" };

/** An item of a stored response's conversation, as GET /v1/responses/{id}/input_items lists it. */
const inputItem = {
  anyOf: [
    closed({
      id: str,
      type: { const: "message" },
      role: { enum: ["user", "system", "developer"] },
      status: completed,
      content: { type: "array", items: inputText },
    }),
    closed({
      id: str,
      type: { const: "message" },
      role: { const: "assistant" },
      status: completed,
      content: { type: "array", items: { anyOf: [storedOutputText, refusal] } },
    }),
    closed({
      id: str,
      type: { const: "function_call" },
      status: completed,
      call_id: str,
      name: str,
      arguments: str,
    }),
    closed({
      id: str,
      type: { const: "function_call_output" },
      status: completed,
      call_id: str,
      output: { anyOf: [str, { type: "array", items: inputText }] },
    }),
    closed({
      id: str,
      type: { const: "reasoning" },
      status: completed,
      summary: { type: "array", maxItems: 0 },
      content: { type: "array", items: reasoningText },
    }),
  ],
};

export const inputItemListSchema = closed({
  object: { const: "list" },
  data: { type: "array", items: inputItem },
  first_id: nullable(str),
  last_id: nullable(str),
  has_more: { type: "boolean" },
});

export const deletedResponseSchema = closed({
  id: str,
  object: { const: "response" },
  deleted: { const: true },
});
