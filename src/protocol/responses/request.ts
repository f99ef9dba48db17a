/**
 * The OpenAI Responses request (`POST /v1/responses`): the wire fields with OpenAI's names and
 * ranges, and their translation into the chat completion request the chat route already parses —
 * the same messages, template, tools, constraints and engine request, so Responses is an edge
 * translation, not a second generation path. Fields this server cannot honour are a 400 naming
 * them, never ignored.
 */
import { ApiError, invalidRequest, unsupportedField, withFieldNames } from "../../errors.ts";
import { codePointLength } from "../../util/code-points.ts";
import { type ChatCompletionRequest, parseChatCompletionRequest } from "../chat-request.ts";
import {
  array,
  boolean,
  compactJson,
  documented,
  type Infer,
  integer,
  isArray,
  isString,
  jsonObject,
  literal,
  number,
  object,
  optional,
  record,
  refused,
  required,
  type Schema,
  string,
  tagged,
  transform,
  union,
  valueError,
  withDefault,
} from "../schema.ts";
import { chatMessages, type InputItem, inputItemSchema } from "./items.ts";

const nullable = { nullable: true };

const functionTool = object({
  type: required(literal(["function"])),
  name: required(string({ minLength: 1, maxLength: 128 })),
  description: optional(string(), nullable),
  parameters: optional(jsonObject(), {
    ...nullable,
    description: "A JSON Schema for the arguments; absent or null: an empty object.",
  }),
  strict: optional(boolean(), {
    ...nullable,
    description:
      "Accepted; calls that the server constrains (required, a named function) always follow the schema, its objects closed to their declared properties.",
  }),
});
export type FunctionTool = Infer<typeof functionTool>;

const toolSchema = tagged<FunctionTool>(
  "type",
  { function: functionTool },
  {
    reject: (type, path) =>
      unsupportedField(path, `"${type}" tools are not served; only function tools (type "function") are`),
  },
);

export type ResponsesToolChoice = "none" | "auto" | "required" | { type: "function"; name: string };

const toolChoiceSchema = union<ResponsesToolChoice>(
  [
    { when: isString, schema: literal(["none", "auto", "required"]) },
    {
      when: (v) => typeof v === "object" && v !== null && !isArray(v),
      schema: tagged<ResponsesToolChoice>(
        "type",
        { function: object({ type: required(literal(["function"])), name: required(string()) }) },
        {
          reject: (type, path) =>
            unsupportedField(
              path,
              `tool_choice of type ${JSON.stringify(type)}: only function tools are served ("none", "auto", "required" or {"type": "function", "name": ...})`,
            ),
        },
      ),
    },
  ],
  'one of "none", "auto", "required" or {"type": "function", "name": ...}',
);

const jsonSchemaFormat = object({
  type: required(literal(["json_schema"])),
  name: required(string({ minLength: 1, maxLength: 64 })),
  schema: required(jsonObject()),
  description: optional(string(), nullable),
  strict: optional(boolean(), {
    ...nullable,
    description:
      "true: every object that leaves additionalProperties unset is closed (OpenAI's strict mode).",
  }),
});

export type TextFormat =
  | { type: "text" }
  | { type: "json_object" }
  | {
      type: "json_schema";
      name: string;
      schema: Record<string, unknown>;
      description?: string;
      strict?: boolean;
    };

const formatSchema = tagged<TextFormat>(
  "type",
  {
    text: object({ type: required(literal(["text"])) }),
    json_object: object({ type: required(literal(["json_object"])) }),
    json_schema: jsonSchemaFormat,
  } as Record<string, Schema<TextFormat>>,
  {
    reject: (type, path) =>
      valueError(path, `expected "text", "json_object" or "json_schema", but got ${JSON.stringify(type)}.`),
  },
);

const textSchema = object({
  format: optional(formatSchema, {
    description: "text (the default), json_object, or json_schema (enforced token by token).",
  }),
  verbosity: optional(refused("the served models have no verbosity setting"), {
    ...nullable,
    description: "Only null.",
  }),
});

export const REASONING_EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

const noReasoningOutput =
  "this server writes no reasoning summaries (a reasoning model's think block is returned whole as a reasoning item)";
const reasoningSchema = object({
  effort: optional(literal(REASONING_EFFORTS), {
    ...nullable,
    description:
      "Only where the model's chat template reads reasoning_effort (low, medium or high); otherwise a 400.",
  }),
  summary: optional(refused(noReasoningOutput), { ...nullable, description: "Only null." }),
  generate_summary: optional(refused(noReasoningOutput), { ...nullable, deprecated: true }),
});

/** Keys OpenAI allows: 16 pairs, keys up to 64 characters, values up to 512. */
const metadataSchema = documented(
  transform(record(string({ maxLength: 512 })), (m, path) => {
    const keys = Object.keys(m);
    if (keys.length > 16) throw valueError(path, `expected at most 16 keys, but got ${keys.length}.`);
    const long = keys.find((k) => k.length > 64 && codePointLength(k) > 64);
    if (long !== undefined)
      throw valueError(path, `key ${JSON.stringify(long)} is longer than 64 characters.`);
    return m;
  }),
  { maxProperties: 16, propertyNames: { maxLength: 64 } },
);

/**
 * What `include` may name: the output text's logprobs, and outputs of tools and inputs this server
 * refuses, which never exist to include.
 */
const INCLUDABLE = [
  "file_search_call.results",
  "web_search_call.results",
  "web_search_call.action.sources",
  "message.input_image.image_url",
  "computer_call_output.output.image_url",
  "code_interpreter_call.outputs",
  "reasoning.encrypted_content",
  "message.output_text.logprobs",
] as const;

/** The include value that asks for the output text's logprobs. */
const LOGPROBS = "message.output_text.logprobs";

const inputSchema = union<string | InputItem[]>(
  [
    { when: isString, schema: string() },
    { when: isArray, schema: array(inputItemSchema) },
  ],
  "a string or an array of input items",
);

/** What JSON Schema can state of input's rule: at least one item, unless a previous response continues. */
const INPUT_OR_PREVIOUS = {
  anyOf: [
    { required: ["previous_response_id"], properties: { previous_response_id: { type: "string" } } },
    {
      required: ["input"],
      properties: { input: { anyOf: [{ type: "string" }, { type: "array", minItems: 1 }] } },
    },
  ],
};

export const responsesRequestSchema = documented(
  object(
    {
      model: required(string(), { description: "Model ID (a model, or <model>:step<N> for a checkpoint)." }),
      input: optional(inputSchema, {
        description:
          "A user message as a string, or items: messages (input_text; an assistant's output_text), function_call and function_call_output. Reasoning items alone are no conversation to answer (a 400).",
      }),
      instructions: optional(string(), {
        ...nullable,
        description: "The system message. Not carried over from a previous response.",
      }),
      previous_response_id: optional(string({ minLength: 1 }), {
        ...nullable,
        description: "A stored response of the same API key: its input and output come before this input.",
      }),
      store: withDefault(boolean(), true, {
        ...nullable,
        description: "Keep the response for retrieval and previous_response_id (for the server's retention).",
      }),
      stream: withDefault(boolean(), false, nullable),
      stream_options: optional(
        object({
          include_obfuscation: optional(documented(boolean(), { const: false }), {
            ...nullable,
            description: "Only false: stream events carry no obfuscation padding.",
          }),
        }),
        { ...nullable, description: "Only with stream=true." },
      ),
      tools: optional(array(toolSchema), { description: "Function tools the model may call." }),
      tool_choice: optional(toolChoiceSchema, {
        ...nullable,
        description:
          "auto (the default with tools): calls are parsed from the output; required / a named function: the output is constrained to a valid call; none: text only.",
      }),
      parallel_tool_calls: withDefault(boolean(), true, nullable),
      text: optional(textSchema, { ...nullable, description: "The output format." }),
      max_output_tokens: optional(integer({ minimum: 1 }), {
        ...nullable,
        description: "Most tokens to generate; reaching it makes the response incomplete.",
      }),
      temperature: optional(number({ minimum: 0, maximum: 2 }), {
        ...nullable,
        description: "0 is greedy. Absent: the model's generation_config, else 1.",
      }),
      top_p: optional(number({ exclusiveMinimum: 0, maximum: 1 }), nullable),
      top_logprobs: optional(integer({ minimum: 0, maximum: 20 }), {
        ...nullable,
        description: `Alternatives per output token; above 0 needs include ${LOGPROBS}.`,
      }),
      reasoning: optional(reasoningSchema, nullable),
      metadata: optional(metadataSchema, { ...nullable, description: "Returned with the response." }),
      user: optional(string({ maxLength: 256 }), { description: "The end user, for the server's log." }),
      safety_identifier: optional(string({ maxLength: 256 }), {
        ...nullable,
        description: "The end user, for the server's log.",
      }),
      prompt_cache_key: optional(string(), {
        ...nullable,
        description: "Accepted; prompt prefixes are cached automatically whether or not it is set.",
      }),
      prompt_cache_retention: optional(literal(["in_memory"]), {
        ...nullable,
        description: "Only in_memory: the prefix cache lives in the server's memory.",
      }),
      service_tier: optional(literal(["auto", "default"]), {
        ...nullable,
        description: "auto or default: the server has one tier.",
      }),
      include: optional(array(literal(INCLUDABLE)), {
        ...nullable,
        description:
          "message.output_text.logprobs: each output token's logprob (text answers only: with tool_choice none). The other values name outputs of tools and inputs this server refuses, so there is never anything to include.",
      }),
      truncation: optional(literal(["disabled", "auto"]), {
        ...nullable,
        description:
          "disabled (the default): a conversation longer than the context is a 400. auto: its oldest turns are dropped until it fits with the output's room (instructions stay; a turn starts at a user, system or developer message); the stored conversation stays whole.",
      }),
      background: optional(documented(boolean(), { const: false }), {
        ...nullable,
        description: "Only false: responses are generated while the request waits.",
      }),
      max_tool_calls: optional(refused("the number of tool calls is not limited by this server"), {
        ...nullable,
        description: "Only null.",
      }),
      conversation: optional(refused("conversations are not stored; continue with previous_response_id"), {
        ...nullable,
        description: "Only null.",
      }),
      prompt: optional(refused("prompt templates are not stored on this server"), {
        ...nullable,
        description: "Only null.",
      }),
    },
    { description: "An OpenAI Responses API request." },
  ),
  INPUT_OR_PREVIOUS,
);

export type ResponsesWire = Infer<typeof responsesRequestSchema>;

/** A parsed Responses request: the wire fields the response echoes, and its whole conversation. */
export interface ResponsesRequest {
  /** The response's id (resp_…). */
  id: string;
  wire: ResponsesWire;
  model: string;
  stream: boolean;
  /** A previous response's input and output items, then this request's input. */
  conversation: InputItem[];
  /** The chat request it translates to. */
  chat: ChatCompletionRequest;
}

/** Refusals whose reason the literal and boolean checks alone would not say. */
function checkValues(body: unknown): void {
  const b = body as Record<string, unknown> | null;
  if (typeof b !== "object" || b === null || Array.isArray(b)) return;
  const refusals: [string, unknown, unknown, string][] = [
    ["background", b.background, true, "responses are generated while the request waits"],
    [
      "prompt_cache_retention",
      b.prompt_cache_retention,
      "24h",
      "the prefix cache lives in the server's memory (in_memory)",
    ],
  ];
  for (const [field, value, refusedValue, why] of refusals)
    if (value === refusedValue) throw unsupportedField(field, why);
  const tier = b.service_tier;
  if (typeof tier === "string" && !["auto", "default"].includes(tier))
    throw unsupportedField(
      "service_tier",
      `service tier ${JSON.stringify(tier)}: the server has one tier (auto or default)`,
    );
  const so = b.stream_options as Record<string, unknown> | null | undefined;
  if (so && typeof so === "object" && so.include_obfuscation === true)
    throw unsupportedField(
      "stream_options.include_obfuscation",
      "stream events carry no obfuscation padding",
    );
}

/** Whether the request asks for the output text's logprobs. */
export function wantsLogprobs(wire: Pick<ResponsesWire, "include">): boolean {
  return wire.include?.includes(LOGPROBS) ?? false;
}

/**
 * Logprobs belong to the output text: top_logprobs needs them asked for, and they are served for
 * text answers only (a tool call's tokens would have no item to carry them).
 */
function checkLogprobs(wire: ResponsesWire): void {
  const asked = wantsLogprobs(wire);
  if (!asked && (wire.top_logprobs ?? 0) > 0)
    throw invalidRequest(`top_logprobs needs include ${JSON.stringify(LOGPROBS)}.`, "top_logprobs");
  const tools = wire.tools ?? [];
  const choice = wire.tool_choice ?? (tools.length > 0 ? "auto" : "none");
  if (asked && choice !== "none")
    throw unsupportedField(
      `include[${wire.include!.indexOf(LOGPROBS)}]`,
      'output logprobs are served for text answers only; send tool_choice "none" (or no tools) with them',
    );
}

/** Parses a Responses body (without the conversation a previous_response_id adds). */
export function parseResponsesWire(body: unknown): { wire: ResponsesWire; input: InputItem[] } {
  checkValues(body);
  const wire = responsesRequestSchema.parse(body, "");
  if (wire.stream_options !== undefined && !wire.stream)
    throw invalidRequest("stream_options can only be set when stream is true.", "stream_options");
  const input: InputItem[] =
    wire.input === undefined
      ? []
      : typeof wire.input === "string"
        ? [{ type: "message", role: "user", content: wire.input }]
        : wire.input;
  checkLogprobs(wire);
  if (input.length === 0 && wire.previous_response_id === undefined)
    throw invalidRequest("input needs at least one item (or a previous_response_id to continue).", "input");
  return { wire, input };
}

/** The chat field paths that can reach a client through the chat route's checks, by their Responses names. */
const renamed = (text: string): string =>
  text
    .replace(/tools\[(\d+)\]\.function\.parameters/g, "tools[$1].parameters")
    .replace(/tools\[(\d+)\]\.function\.name/g, "tools[$1].name")
    .replace(/tool_choice\.function\.name/g, "tool_choice.name")
    .replace(/response_format\.json_schema\.schema/g, "text.format.schema")
    .replace(/response_format\.json_schema/g, "text.format")
    .replace(/response_format/g, "text.format")
    .replace(/max_completion_tokens/g, "max_output_tokens");

/** A chat-route error (parsing, the engine's checks, an engine error event) naming the Responses fields. */
export function inResponsesTerms(err: ApiError): ApiError {
  return withFieldNames(err, renamed);
}

function chatToolChoice(choice: ResponsesToolChoice): ChatCompletionRequest["tool_choice"] {
  return typeof choice === "string" ? choice : { type: "function", function: { name: choice.name } };
}

function responseFormat(format: TextFormat | undefined): Record<string, unknown> | undefined {
  if (format === undefined || format.type === "text") return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  const { name, schema, description, strict } = format;
  return { type: "json_schema", json_schema: { name, schema, description, strict } };
}

/**
 * The chat request of a conversation: `prior` items (a previous response's input and output) then
 * this request's input, with the request's sampling, tools and format. `reasoningEffort` is set
 * only when the model's template reads it (the service decides).
 */
export function toChatRequest(
  wire: ResponsesWire,
  prior: readonly InputItem[],
  input: readonly InputItem[],
  reasoningEffort?: "low" | "medium" | "high",
): ChatCompletionRequest {
  const tools = wire.tools ?? [];
  const choice = wire.tool_choice ?? (tools.length > 0 ? "auto" : "none");
  const messages = chatMessages(wire.instructions, [...prior, ...input]);
  // Reasoning items only carry an assistant turn's reasoning: alone they are no conversation. A
  // system or developer message alone is one, as in chat (OpenAI answers it too).
  if (messages.length === (wire.instructions === undefined ? 0 : 1))
    throw invalidRequest(
      "input has no message or function call output to answer (reasoning items alone are none).",
      "input",
    );
  const body = {
    model: wire.model,
    messages,
    ...(tools.length > 0 && {
      tools: tools.map((t) => ({
        type: "function",
        function: { name: t.name, description: t.description, parameters: t.parameters, strict: t.strict },
      })),
    }),
    tool_choice: chatToolChoice(choice),
    parallel_tool_calls: wire.parallel_tool_calls,
    response_format: responseFormat(wire.text?.format),
    max_completion_tokens: wire.max_output_tokens,
    temperature: wire.temperature,
    top_p: wire.top_p,
    user: wire.user ?? wire.safety_identifier,
    logprobs: wantsLogprobs(wire),
    top_logprobs: wire.top_logprobs,
    reasoning_effort: reasoningEffort,
    stream: wire.stream,
    // The Responses stream always ends with its usage (response.completed).
    stream_options: wire.stream ? { include_usage: true } : undefined,
  };
  try {
    return parseChatCompletionRequest(compactJson(body));
  } catch (err) {
    throw err instanceof ApiError ? inResponsesTerms(err) : err;
  }
}
