/**
 * The Anthropic Messages request (`POST /v1/messages`, and its `count_tokens` sibling): the wire
 * fields with Anthropic's names and ranges, and their translation into the chat completion request
 * the chat route already parses — the same messages, template, tools, constraints and engine
 * request, so Messages is an edge translation, not a second generation path.
 */
import { ApiError, invalidRequest, unsupportedField, withFieldNames } from "../../errors.ts";
import { type ChatCompletionRequest, parseChatCompletionRequest } from "../chat-request.ts";
import type { ChatMessage, ToolCall } from "../messages.ts";
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
  required,
  type Schema,
  string,
  tagged,
  union,
  valueError,
  withDefault,
} from "../schema.ts";

const nullable = { nullable: true };

/** Anthropic's least thinking budget. */
export const MIN_THINKING_BUDGET = 1024;

/** Accepted on any block: this server caches every prompt prefix on its own (the prefix cache). */
const cacheControl = optional(
  object({
    type: required(literal(["ephemeral"])),
    ttl: optional(literal(["5m", "1h"])),
  }),
  {
    ...nullable,
    description: "Accepted; prompt prefixes are cached automatically whether or not it is set.",
  },
);

const textBlock = object({
  type: required(literal(["text"])),
  text: required(string()),
  cache_control: cacheControl,
});
type TextBlock = Infer<typeof textBlock>;

const toolUseBlock = object({
  type: required(literal(["tool_use"])),
  id: required(string({ minLength: 1 })),
  name: required(string({ minLength: 1 })),
  input: required(jsonObject()),
  cache_control: cacheControl,
});

/**
 * A think block a reasoning model wrote in an earlier turn, sent back as clients do: its text goes
 * to the template as the turn's reasoning (templates decide whether past reasoning is shown).
 * ortserve signs nothing, so the signature is not checked; redacted thinking has no text to give.
 */
const thinkingBlock = object({
  type: required(literal(["thinking"])),
  thinking: required(string()),
  signature: optional(string()),
  cache_control: cacheControl,
});
const redactedThinkingBlock = object({
  type: required(literal(["redacted_thinking"])),
  data: required(string()),
  cache_control: cacheControl,
});

const MEDIA_BLOCKS = ["image", "document", "search_result", "container_upload"];

const rejectBlock = (allowed: string) => (type: string, typePath: string) =>
  MEDIA_BLOCKS.includes(type)
    ? unsupportedField(typePath, `"${type}" blocks need a multimodal model; the served model is text-only`)
    : valueError(typePath, `unknown content block type ${JSON.stringify(type)}; expected ${allowed}.`);

const toolResultContent = union<string | TextBlock[]>(
  [
    { when: isString, schema: string() },
    {
      when: isArray,
      schema: array(tagged<TextBlock>("type", { text: textBlock }, { reject: rejectBlock('"text"') })),
    },
  ],
  "a string or an array of text blocks",
);

const toolResultBlock = object({
  type: required(literal(["tool_result"])),
  tool_use_id: required(string({ minLength: 1 })),
  content: optional(toolResultContent),
  is_error: withDefault(boolean(), false, {
    description: "true: the tool failed; its content reaches the model prefixed with `Error: `.",
  }),
  cache_control: cacheControl,
});

type Block =
  | Infer<typeof textBlock>
  | Infer<typeof toolUseBlock>
  | Infer<typeof toolResultBlock>
  | Infer<typeof thinkingBlock>
  | Infer<typeof redactedThinkingBlock>;

const userBlock = tagged<Block>(
  "type",
  { text: textBlock, tool_result: toolResultBlock },
  { reject: rejectBlock('"text" or "tool_result"') },
);
const assistantBlock = tagged<Block>(
  "type",
  {
    text: textBlock,
    tool_use: toolUseBlock,
    thinking: thinkingBlock,
    redacted_thinking: redactedThinkingBlock,
  },
  { reject: rejectBlock('"text", "tool_use", "thinking" or "redacted_thinking"') },
);

/** A user turn has at least one block (Anthropic's rule); an assistant turn, a prefill, may have none. */
const blocks = (block: Schema<Block>, minItems: number) =>
  union<string | Block[]>(
    [
      { when: isString, schema: string() },
      { when: isArray, schema: array(block, { minItems }) },
    ],
    "a string or an array of content blocks",
  );

const messageSchema = tagged<{ role: "user" | "assistant"; content: string | Block[] }>(
  "role",
  {
    user: object({ role: required(literal(["user"])), content: required(blocks(userBlock, 1)) }),
    assistant: object({
      role: required(literal(["assistant"])),
      content: required(blocks(assistantBlock, 0)),
    }),
  },
  {
    reject: (role, path) =>
      valueError(path, `expected "user" or "assistant", but got ${JSON.stringify(role)}.`),
  },
);

const systemSchema = union<string | TextBlock[]>(
  [
    { when: isString, schema: string() },
    { when: isArray, schema: array(textBlock) },
  ],
  "a string or an array of text blocks",
);

const toolSchema = object({
  type: optional(literal(["custom"]), nullable),
  name: required(string({ minLength: 1, maxLength: 128 })),
  description: optional(string()),
  input_schema: required(
    documented(jsonObject(), { properties: { type: { const: "object" } }, required: ["type"] }),
    { description: 'A JSON Schema of "type": "object" for the tool\'s input.' },
  ),
  cache_control: cacheControl,
});

const parallel = optional(boolean(), {
  description: "true: at most one tool call (chat's parallel_tool_calls=false).",
});
const toolChoiceSchema = tagged<ToolChoice>(
  "type",
  {
    auto: object({ type: required(literal(["auto"])), disable_parallel_tool_use: parallel }),
    any: object({ type: required(literal(["any"])), disable_parallel_tool_use: parallel }),
    tool: object({
      type: required(literal(["tool"])),
      name: required(string()),
      disable_parallel_tool_use: parallel,
    }),
    none: object({ type: required(literal(["none"])) }),
  },
  {
    reject: (t, path) =>
      valueError(path, `expected one of "auto", "any", "tool", "none", but got ${JSON.stringify(t)}.`),
  },
);
type ToolChoice =
  | { type: "auto" | "any"; disable_parallel_tool_use?: boolean }
  | { type: "tool"; name: string; disable_parallel_tool_use?: boolean }
  | { type: "none" };

/**
 * `disabled` reaches the template as `enable_thinking: false` (as Qwen3's reads it); `enabled` as
 * `enable_thinking: true` plus a thinking budget the engine holds the model to (the chat route's
 * thinking_token_budget). Anthropic's ranges: at least 1024 tokens, and fewer than max_tokens.
 */
type Thinking = { type: "disabled" } | { type: "enabled"; budget_tokens: number };
const thinkingSchema = tagged<Thinking>(
  "type",
  {
    disabled: object({ type: required(literal(["disabled"])) }),
    enabled: object({
      type: required(literal(["enabled"])),
      budget_tokens: required(integer({ minimum: MIN_THINKING_BUDGET }), {
        description: `Most tokens the model may think for (at least ${MIN_THINKING_BUDGET}, fewer than max_tokens); then its think block is closed and the answer follows.`,
      }),
    }),
  },
  {
    reject: (t, path) => valueError(path, `expected "enabled" or "disabled", but got ${JSON.stringify(t)}.`),
  },
);

/** Anthropic's efforts; a chat template's reasoning_effort takes low, medium and high (serving/template-effort.ts). */
const EFFORTS = ["low", "medium", "high", "xhigh", "max"] as const;
export type Effort = (typeof EFFORTS)[number];

/** Anthropic's one output format: a JSON Schema the text block's JSON is held to. */
const jsonOutputFormat = object({
  type: required(literal(["json_schema"])),
  schema: required(jsonObject(), { description: "A JSON Schema; enforced token by token as written." }),
});
const outputFormatSchema = tagged<Infer<typeof jsonOutputFormat>>(
  "type",
  { json_schema: jsonOutputFormat },
  {
    reject: (t, path) =>
      valueError(path, `expected "json_schema" (the one output format), but got ${JSON.stringify(t)}.`),
  },
);

const outputConfigSchema = object({
  format: optional(outputFormatSchema, {
    ...nullable,
    description:
      "json_schema: the text block is JSON valid against schema (chat's response_format json_schema, held token by token; compact when the model's ortserve.json says so). Not with a tool_choice of any or tool.",
  }),
  effort: optional(literal(EFFORTS), {
    ...nullable,
    description:
      "low, medium or high reach the chat template as reasoning_effort where the model's template reads it; otherwise (and xhigh, max) a 400.",
  }),
});

/** The fields both routes read: the conversation, its system prompt and its tools. */
const promptShape = {
  model: required(string(), { description: "Model ID (a model, or <model>:step<N> for a checkpoint)." }),
  messages: required(array(messageSchema, { minItems: 1 }), {
    description: "The conversation: user and assistant turns.",
  }),
  system: optional(systemSchema, { description: "The system prompt: a string or text blocks." }),
  tools: optional(array(toolSchema), { description: "Tools the model may call (client tools only)." }),
  tool_choice: optional(toolChoiceSchema, {
    description:
      "auto (the default with tools): calls are parsed from the output; any / tool (one of tools, by name): the output is constrained to a valid call; none: text only. Every type but none needs tools. Servers started with --strict-tool-choice take only none.",
  }),
  thinking: optional(thinkingSchema, {
    description:
      "enabled: the template is asked to think and the model's think block is held to budget_tokens (a model with a reasoning parser only); disabled: the template is asked not to think. A reasoning model's think block is returned as thinking blocks.",
  }),
  output_config: optional(outputConfigSchema, {
    ...nullable,
    description:
      "The answer's format (a JSON Schema) and the reasoning effort. A format cannot be combined with a tool_choice that forces a tool (any or tool): both constrain the output.",
  }),
};

/** What JSON Schema can state of tool_choice's rule: a type other than none needs tools. */
const TOOL_CHOICE_NEEDS_TOOLS = {
  anyOf: [
    { not: { required: ["tool_choice"] } },
    { properties: { tool_choice: { properties: { type: { const: "none" } } } } },
    { required: ["tools"], properties: { tools: { minItems: 1 } } },
  ],
};

export const messagesRequestSchema = documented(
  object(
    {
      ...promptShape,
      max_tokens: required(integer({ minimum: 1 }), { description: "Most tokens to generate." }),
      stop_sequences: optional(array(string({ minLength: 1 })), {
        description: "Strings that end the generation (stop_reason stop_sequence).",
      }),
      temperature: optional(number({ minimum: 0, maximum: 1 }), {
        description: "0 is greedy. Absent: the model's generation_config, else 1.",
      }),
      top_p: optional(number({ exclusiveMinimum: 0, maximum: 1 })),
      top_k: optional(integer({ minimum: 0 }), { description: "0: off." }),
      metadata: optional(object({ user_id: optional(string({ maxLength: 256 }), nullable) }), {
        description: "user_id names the end user in the server's log.",
      }),
      stream: withDefault(boolean(), false),
    },
    { description: "An Anthropic Messages API request." },
  ),
  TOOL_CHOICE_NEEDS_TOOLS,
);

export const countTokensRequestSchema = documented(
  object(promptShape, {
    description: "The prompt part of a Messages request, counted without generating.",
  }),
  TOOL_CHOICE_NEEDS_TOOLS,
);

export type MessagesWire = Infer<typeof messagesRequestSchema>;
type PromptWire = Infer<typeof countTokensRequestSchema>;

/**
 * A parsed prompt: the chat request it translates to, and the effort asked for (set on the chat
 * request once the model is known: only a template that reads it may take it).
 */
export interface PromptRequest {
  chat: ChatCompletionRequest;
  effort?: Effort;
}

/** A parsed Messages request: the chat request it translates to, plus what the response needs. */
export interface MessagesRequest extends PromptRequest {
  model: string;
  stream: boolean;
}

/** Parses a Messages body; errors name the Anthropic field. */
export function parseMessagesRequest(body: unknown): MessagesRequest {
  const wire = messagesRequestSchema.parse(body, "");
  const thinking = wire.thinking;
  if (thinking?.type === "enabled" && thinking.budget_tokens >= wire.max_tokens)
    throw invalidRequest(
      `thinking.budget_tokens (${thinking.budget_tokens}) must be less than max_tokens (${wire.max_tokens}).`,
      "thinking.budget_tokens",
    );
  const chat = toChatRequest(wire, {
    max_tokens: wire.max_tokens,
    stop: wire.stop_sequences,
    temperature: wire.temperature,
    top_p: wire.top_p,
    top_k: wire.top_k,
    user: wire.metadata?.user_id ?? undefined,
    stream: wire.stream,
    // The Messages stream always ends with its usage (message_delta).
    stream_options: wire.stream ? { include_usage: true } : undefined,
  });
  return { model: wire.model, stream: wire.stream, chat, ...effortOf(wire) };
}

/** Parses a count_tokens body into the chat request whose prompt is counted. */
export function parseCountTokensRequest(body: unknown): PromptRequest {
  const wire = countTokensRequestSchema.parse(body, "");
  return { chat: toChatRequest(wire, {}), ...effortOf(wire) };
}

const effortOf = (wire: PromptWire): { effort?: Effort } =>
  wire.output_config?.effort ? { effort: wire.output_config.effort } : {};

/** The chat field paths and values that can reach a client through the chat route's checks, by their Messages names. */
const renamed = (text: string): string =>
  text
    .replace(/tools\[(\d+)\]\.function\.parameters/g, "tools[$1].input_schema")
    .replace(
      /response_format\.json_schema\.schema|structured_outputs\.json\b/g,
      "output_config.format.schema",
    )
    .replace(/response_format(\.json_schema)?/g, "output_config.format")
    .replace(/tool_choice "required"/g, 'tool_choice of type "any"')
    .replace(/tool_choice naming a function/g, 'tool_choice of type "tool"');

/** A chat-route error (parsing, the engine's checks, an engine error event) naming the Messages fields. */
export function inMessagesTerms(err: ApiError): ApiError {
  return withFieldNames(err, renamed);
}

/** output_config.format as chat's response_format: the schema as written (objects open where it leaves them open). */
function responseFormat(wire: PromptWire): Record<string, unknown> | undefined {
  const format = wire.output_config?.format;
  if (format === undefined) return undefined;
  return { type: "json_schema", json_schema: { name: "output", schema: format.schema } };
}

function toChatRequest(wire: PromptWire, sampling: Record<string, unknown>): ChatCompletionRequest {
  const tools = wire.tools ?? [];
  const choice = wire.tool_choice ?? { type: tools.length > 0 ? "auto" : "none" };
  if (choice.type !== "none" && tools.length === 0)
    throw invalidRequest(`tool_choice of type "${choice.type}" needs tools.`, "tool_choice");
  if (choice.type === "tool" && !tools.some((t) => t.name === choice.name))
    throw invalidRequest(
      `tool_choice names the tool "${choice.name}", which is not one of tools.`,
      "tool_choice.name",
    );
  const body = {
    model: wire.model,
    messages: chatMessages(wire),
    ...(tools.length > 0 && {
      tools: tools.map((t) => ({
        type: "function",
        function: { name: t.name, description: t.description, parameters: t.input_schema },
      })),
    }),
    tool_choice: chatToolChoice(choice),
    ...(wire.thinking && { chat_template_kwargs: { enable_thinking: wire.thinking.type === "enabled" } }),
    ...(wire.thinking?.type === "enabled" && { thinking_token_budget: wire.thinking.budget_tokens }),
    parallel_tool_calls: !("disable_parallel_tool_use" in choice && choice.disable_parallel_tool_use),
    response_format: responseFormat(wire),
    ...sampling,
  };
  try {
    return parseChatCompletionRequest(compactJson(body));
  } catch (err) {
    throw err instanceof ApiError ? inMessagesTerms(err) : err;
  }
}

function chatToolChoice(choice: ToolChoice): ChatCompletionRequest["tool_choice"] {
  switch (choice.type) {
    case "none":
    case "auto":
      return choice.type;
    case "any":
      return "required";
    case "tool":
      return { type: "function", function: { name: choice.name } };
  }
}

const textOf = (content: string | TextBlock[]): string =>
  typeof content === "string" ? content : content.map((b) => b.text).join("\n");

/**
 * Anthropic's turns as chat messages: the system prompt first; a user turn's tool_result blocks
 * become tool messages (in order, before its text, as Anthropic requires them first); an assistant
 * turn's tool_use blocks become its tool_calls.
 */
export function chatMessages(wire: Pick<PromptWire, "system" | "messages">): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (wire.system !== undefined) out.push({ role: "system", content: textOf(wire.system) });
  for (const m of wire.messages) {
    if (typeof m.content === "string") {
      out.push({ role: m.role, content: m.content });
      continue;
    }
    if (m.role === "assistant") {
      const text = m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n");
      const thought = m.content.flatMap((b) => (b.type === "thinking" ? [b.thinking] : [])).join("\n");
      const calls: ToolCall[] = m.content.flatMap((b) =>
        b.type === "tool_use"
          ? [
              {
                id: b.id,
                type: "function" as const,
                function: { name: b.name, arguments: JSON.stringify(b.input) },
              },
            ]
          : [],
      );
      out.push({
        role: "assistant",
        content: text,
        ...(thought !== "" && { reasoning: thought }),
        ...(calls.length > 0 && { tool_calls: calls }),
      });
      continue;
    }
    const texts: string[] = [];
    for (const b of m.content) {
      if (b.type === "tool_result") {
        const result = b.content === undefined ? "" : textOf(b.content);
        out.push({
          role: "tool",
          tool_call_id: b.tool_use_id,
          content: b.is_error ? `Error: ${result}` : result,
        });
      } else if (b.type === "text") texts.push(b.text);
    }
    if (texts.length > 0) out.push({ role: "user", content: texts.join("\n") });
  }
  return out;
}
