/**
 * The Messages response, built from the chat completion the same engine events make: content
 * blocks (text, then tool_use for each parsed call), Anthropic's stop reasons and usage.
 */
import type { EngineEvent } from "../../core/types.ts";
import type { ChatCompletionAccumulator, ChatCompletionChoice, ChatCompletionResponse } from "../response.ts";
import type { ToolCall } from "../tool-calls/parsers.ts";

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use";

export type ContentBlock =
  | { type: "text"; text: string }
  /** A reasoning model's think block; ortserve signs nothing, so the signature is empty. */
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> };

export interface MessagesUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

export interface AnthropicMessage {
  id: string;
  type: "message";
  role: "assistant";
  model: string;
  content: ContentBlock[];
  stop_reason: StopReason;
  stop_sequence: string | null;
  usage: MessagesUsage;
}

export function messageId(requestId: string): string {
  return `msg_${requestId}`;
}

/** Chat's call ids (`call_<hex>`) in Anthropic's spelling (`toolu_<hex>`). */
export function toolUseId(callId: string): string {
  return callId.replace(/^call_/, "toolu_");
}

/** A chat finish → Anthropic's stop reason; a matched stop string is the stop sequence. */
export function stopReason(
  finish: ChatCompletionChoice["finish_reason"],
  stop: number | string | null | undefined,
): { stop_reason: StopReason; stop_sequence: string | null } {
  if (finish === "tool_calls") return { stop_reason: "tool_use", stop_sequence: null };
  if (finish === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (finish === "stop" && typeof stop === "string")
    return { stop_reason: "stop_sequence", stop_sequence: stop };
  return { stop_reason: "end_turn", stop_sequence: null };
}

/** Anthropic counts prompt tokens read from the cache apart from the rest of the input. */
export function messagesUsage(promptTokens: number, outputTokens: number, cachedTokens = 0): MessagesUsage {
  return {
    input_tokens: promptTokens - cachedTokens,
    output_tokens: outputTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cachedTokens,
  };
}

/** A parsed call's arguments as the tool_use input (the parser only makes calls of JSON objects). */
export function toolUseBlock(call: ToolCall): ContentBlock {
  return {
    type: "tool_use",
    id: toolUseId(call.id),
    name: call.function.name,
    input: JSON.parse(call.function.arguments) as Record<string, unknown>,
  };
}

export function toAnthropicMessage(chat: ChatCompletionResponse): AnthropicMessage {
  const choice = chat.choices[0]!;
  const text = choice.message.content ?? "";
  const thought = choice.message.reasoning;
  const content: ContentBlock[] = [
    ...(thought ? [{ type: "thinking" as const, thinking: thought, signature: "" }] : []),
    ...(text !== "" ? [{ type: "text" as const, text }] : []),
    ...choice.message.tool_calls.map(toolUseBlock),
  ];
  const u = chat.usage;
  return {
    id: chat.id.replace(/^chatcmpl-/, "msg_"),
    type: "message",
    role: "assistant",
    model: chat.model,
    content,
    ...stopReason(choice.finish_reason, choice.stop_reason),
    usage: messagesUsage(u.prompt_tokens, u.completion_tokens, u.prompt_tokens_details?.cached_tokens),
  };
}

/** The chat accumulator's response, in Anthropic's shape. */
export class MessagesAccumulator {
  private readonly chat: ChatCompletionAccumulator;

  constructor(chat: ChatCompletionAccumulator) {
    this.chat = chat;
  }

  push(event: EngineEvent): void {
    this.chat.push(event);
  }

  result(): AnthropicMessage {
    return toAnthropicMessage(this.chat.result());
  }
}
