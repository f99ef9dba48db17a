/**
 * Tool-call parsers by name (a model's `tool_parser` in ortserve.json), and the response shapes
 * built from their output: message.tool_calls for a full response, vLLM's tool_calls deltas for a
 * stream (the call's id, type and name first, then its arguments).
 */
import { randomBytes } from "node:crypto";
import type { ToolParserName } from "../../models/registry/types.ts";
import type { ChatCompletionRequest } from "../chat-request.ts";
import { HermesToolCallParser } from "./hermes.ts";
import type { ParsedToolCall, ToolCallStreamParser, ToolParserOptions } from "./types.ts";

const PARSERS: Record<ToolParserName, (o: ToolParserOptions) => ToolCallStreamParser> = {
  hermes: (o) => new HermesToolCallParser(o),
};

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** One streamed tool-call delta (vLLM's shape). */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

/**
 * A parser for the request's output, or undefined when its tool calls are not parsed. A stream
 * of forced calls (their grammar keeps them well formed) gets its arguments as they arrive.
 */
export function toolCallParser(
  req: Pick<ChatCompletionRequest, "tool_choice" | "tools" | "parallel_tool_calls" | "constraint_field">,
  parser: ToolParserName | undefined,
  streaming = false,
): ToolCallStreamParser | undefined {
  if (req.tool_choice === "none" || parser === undefined) return undefined;
  const toolNames = new Set((req.tools ?? []).map((t) => t.function.name));
  const streamArguments = streaming && req.constraint_field === "tool_choice";
  return PARSERS[parser]({ toolNames, parallel: req.parallel_tool_calls, streamArguments });
}

export function toolCallId(): string {
  return `call_${randomBytes(12).toString("hex")}`;
}

export function toolCall(call: ParsedToolCall): ToolCall {
  return { id: toolCallId(), type: "function", function: { ...call } };
}

/** A full response's content and calls: text outside the calls (null when there is none). */
export function parseToolCalls(
  parser: ToolCallStreamParser,
  text: string,
): { content: string | null; calls: ToolCall[] } {
  let content = "";
  const calls: ToolCall[] = [];
  for (const part of [...parser.push(text), ...parser.finish()]) {
    if (part.kind === "call") calls.push(toolCall(part.call));
    else if (part.kind === "content") content += part.content;
  }
  return { content: calls.length > 0 && content === "" ? null : content, calls };
}

/** A streamed call's first delta: its id, type and name, no arguments yet. */
export function toolCallHeader(index: number, name: string): ToolCallDelta {
  return { index, id: toolCallId(), type: "function", function: { name, arguments: "" } };
}

/** A streamed call: its header delta, then its arguments. */
export function toolCallDeltas(index: number, call: ParsedToolCall): ToolCallDelta[] {
  return [toolCallHeader(index, call.name), { index, function: { arguments: call.arguments } }];
}
