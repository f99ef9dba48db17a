/**
 * Chat messages on the wire: the OpenAI roles (developer, system, user, assistant, tool, function)
 * plus any other role string as a generic message, as vLLM accepts. The served models are
 * text-only, so image/audio/file content parts are rejected naming `messages[i].content[j].type`.
 */
import { unsupportedField } from "../errors.ts";
import {
  array,
  boolean,
  isArray,
  isString,
  jsonObject,
  literal,
  object,
  optional,
  refused,
  required,
  type Schema,
  type Shape,
  string,
  tagged,
  transform,
  union,
  valueError,
} from "./schema.ts";

export interface TextPart {
  type: "text";
  text: string;
}

export type MessageContent = string | TextPart[];

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A parsed message; only the keys the client set are present. */
export interface ChatMessage {
  role: string;
  content?: MessageContent | null;
  name?: string;
  tool_call_id?: string;
  tool_calls?: ToolCall[];
  function_call?: { name: string; arguments: string };
  refusal?: string;
  reasoning?: string;
}

/** Part types that carry media; each one is a 400 on a text-only model. */
const MEDIA_PART_TYPES = [
  "image_url",
  "input_image",
  "image_pil",
  "image_embeds",
  "input_audio",
  "audio_url",
  "audio_embeds",
  "video_url",
  "file",
  "input_file",
  "prompt_embeds",
];

const textPart: Schema<TextPart> = object({ type: required(literal(["text"])), text: required(string()) });

// Other text-bearing parts vLLM accepts; templates only know text, so each becomes a text part.
const asText = (type: string, key: string, extra: Shape = {}): Schema<TextPart> =>
  transform(object({ type: required(literal([type])), [key]: required(string()), ...extra }), (p) => ({
    type: "text" as const,
    text: (p as Record<string, unknown>)[key] as string,
  }));

const contentPart: Schema<TextPart> = tagged(
  "type",
  {
    text: textPart,
    input_text: asText("input_text", "text"),
    output_text: asText("output_text", "text"),
    refusal: asText("refusal", "refusal"),
    thinking: asText("thinking", "thinking", { closed: optional(boolean()) }),
  },
  {
    reject: (type, typePath) =>
      MEDIA_PART_TYPES.includes(type)
        ? unsupportedField(
            typePath,
            `"${type}" content needs a multimodal model; the served model is text-only`,
          )
        : valueError(typePath, `unknown content part type ${JSON.stringify(type)}; expected "text".`),
  },
);

const content: Schema<MessageContent> = union<MessageContent>(
  [
    { when: isString, schema: string() },
    { when: isArray, schema: array(contentPart) },
  ],
  "a string or an array of content parts",
);

const toolCall: Schema<ToolCall> = object({
  id: required(string()),
  type: required(literal(["function"])),
  function: required(object({ name: required(string()), arguments: required(string()) })),
});

const functionCall = object({ name: required(string()), arguments: required(string()) });

const nullable = { nullable: true };

const plainMessage = (role: string, description: string) =>
  object(
    { role: required(literal([role])), content: required(content), name: optional(string()) },
    { description },
  );

const assistantMessage = transform(
  object(
    {
      role: required(literal(["assistant"])),
      content: optional(content, nullable),
      name: optional(string()),
      refusal: optional(string(), nullable),
      tool_calls: optional(array(toolCall), nullable),
      function_call: optional(functionCall, { ...nullable, deprecated: true }),
      reasoning: optional(string(), nullable),
      reasoning_content: optional(string(), {
        ...nullable,
        deprecated: true,
        description: "Alias of reasoning.",
      }),
      // A response message sent back as history carries these output-only fields.
      annotations: optional(array(jsonObject()), nullable),
      audio: optional(refused("the served model is text-only"), nullable),
    },
    { description: "A previous reply of the model." },
  ),
  (m): ChatMessage => {
    const { annotations: _a, audio: _b, reasoning_content, ...rest } = m;
    return rest.reasoning === undefined && reasoning_content !== undefined
      ? { ...rest, reasoning: reasoning_content }
      : rest;
  },
);

const toolMessage = object(
  {
    role: required(literal(["tool"])),
    content: required(content),
    tool_call_id: required(string()),
    name: optional(string()),
  },
  { description: "The result of a tool call." },
);

const functionMessage = object(
  { role: required(literal(["function"])), content: optional(string(), nullable), name: required(string()) },
  { description: "Deprecated: the result of a function call." },
);

const genericMessage = object(
  {
    role: required(string()),
    content: optional(content, nullable),
    name: optional(string()),
    tool_call_id: optional(string()),
    tool_calls: optional(array(toolCall), nullable),
    reasoning: optional(string(), nullable),
  },
  { description: "A message with any other role; the chat template decides what it means." },
);

export const messageSchema: Schema<ChatMessage> = tagged<ChatMessage>(
  "role",
  {
    developer: plainMessage("developer", "Instructions that replace the system message on newer models."),
    system: plainMessage("system", "Instructions for the model."),
    user: plainMessage("user", "A message from the user."),
    assistant: assistantMessage,
    tool: toolMessage,
    function: functionMessage,
  },
  { schema: genericMessage },
);

export const messagesSchema: Schema<ChatMessage[]> = array(messageSchema, { minItems: 1 });

/** The text of a message's content: parts joined by newlines (as vLLM's string content format). */
export function contentText(content: MessageContent | null | undefined): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  return content.map((p) => p.text).join("\n");
}
