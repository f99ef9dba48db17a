/**
 * Turns API messages into the `messages` a chat template sees, the way vLLM's parse_chat_messages
 * does: text parts are joined into one string ("string" format) unless the template loops over
 * message content ("openai" format, parts kept as `{type: "text", text}`), and tool-call arguments
 * are parsed from JSON strings into objects because tool-use templates expect objects.
 */
import { invalidRequest, unsupportedField } from "../errors.ts";
import type { ChatMessage } from "./types.ts";

export type ContentFormat = "string" | "openai";

export type TemplateMessage = Record<string, unknown>;

/** Which field of a text-bearing part holds its text (vLLM's MM_PARSER_MAP text entries). */
const TEXT_FIELD: Readonly<Record<string, string>> = {
  text: "text",
  input_text: "text",
  output_text: "text",
  refusal: "refusal",
  thinking: "thinking",
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The text of one part, or null for a text part without text (vLLM skips those). */
function partText(part: unknown): string | null {
  if (typeof part === "string") return part;
  if (!isRecord(part) || typeof part.type !== "string") {
    throw invalidRequest("Each content part must be an object with a string `type`.", "messages");
  }
  const field = TEXT_FIELD[part.type];
  if (field === undefined) {
    throw unsupportedField(
      "messages",
      `content parts of type '${part.type}' (this server accepts text only)`,
    );
  }
  const text = part[field];
  if (text === undefined || text === null) return null;
  if (typeof text !== "string")
    throw invalidRequest(`Content part '${part.type}' must hold a string.`, "messages");
  return text;
}

function partTexts(content: unknown): string[] {
  if (content === undefined || content === null) return [];
  if (typeof content === "string") return [content];
  if (!Array.isArray(content))
    throw invalidRequest("Message content must be a string, null or a list.", "messages");
  const texts: string[] = [];
  for (const part of content) {
    const text = partText(part);
    if (text !== null) texts.push(text);
  }
  return texts;
}

/** A message's content as one string: text parts joined by newlines, null as "" (vLLM; also what echo shows). */
export function contentText(content: unknown): string {
  return partTexts(content).join("\n");
}

/** JSON-string arguments become objects; anything unparsable becomes {} (vLLM _postprocess_messages). */
function parseArguments(args: unknown): unknown {
  if (typeof args === "string") {
    try {
      return JSON.parse(args);
    } catch {
      return {};
    }
  }
  return isRecord(args) || Array.isArray(args) ? args : {};
}

function templateToolCalls(toolCalls: unknown): unknown[] {
  if (!Array.isArray(toolCalls)) throw invalidRequest("`tool_calls` must be a list.", "messages");
  return toolCalls.map((call) => {
    if (!isRecord(call) || !isRecord(call.function)) {
      throw invalidRequest("Each tool call must be an object with a `function` object.", "messages");
    }
    return { ...call, function: { ...call.function, arguments: parseArguments(call.function.arguments) } };
  });
}

function templateMessage(message: ChatMessage, format: ContentFormat): TemplateMessage {
  if (!isRecord(message) || typeof message.role !== "string") {
    throw invalidRequest("Each message must be an object with a string `role`.", "messages");
  }
  const { role } = message;
  const texts = partTexts(message.content);
  const out: TemplateMessage = {
    role,
    content: format === "string" ? texts.join("\n") : texts.map((text) => ({ type: "text", text })),
  };
  if (role === "assistant") {
    // An empty list is dropped so templates take their plain-assistant path.
    if (message.tool_calls != null) {
      const calls = templateToolCalls(message.tool_calls);
      if (calls.length > 0) out.tool_calls = calls;
    }
    const reasoning = message.reasoning ?? message.reasoning_content;
    if (reasoning != null) {
      out.reasoning = reasoning;
      out.reasoning_content = reasoning;
    }
  } else if (role === "tool") {
    if (message.tool_call_id !== undefined) out.tool_call_id = message.tool_call_id;
    // Most templates only handle string tool results, even in the parts format.
    if (format === "openai") out.content = texts.join("\n");
  }
  if (typeof message.name === "string") out.name = message.name;
  if (role === "developer") out.tools = message.tools ?? null;
  return out;
}

export function toTemplateMessages(
  messages: readonly ChatMessage[],
  format: ContentFormat,
): TemplateMessage[] {
  if (!Array.isArray(messages)) throw invalidRequest("`messages` must be a list.", "messages");
  return messages.map((message) => templateMessage(message, format));
}
