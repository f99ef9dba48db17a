/** Request-side shapes the chat renderer consumes (OpenAI chat completion messages and tools). */

export interface ChatTextPart {
  type: "text";
  text: string;
}

/**
 * A content part. Only text-bearing parts (text, input_text, output_text, refusal, thinking) can be
 * rendered; the wider type lets the renderer reject anything else with a clear 400.
 */
export type ChatContentPart = ChatTextPart | { readonly type: string; readonly [key: string]: unknown };

export type ChatContent = string | null | readonly ChatContentPart[];

export interface ChatToolCall {
  id: string;
  type: "function";
  /** `arguments` is a JSON string on the wire. */
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  /** developer, system, user, assistant, tool, function or any custom role. */
  role: string;
  content?: ChatContent;
  name?: string;
  tool_calls?: readonly ChatToolCall[] | null;
  tool_call_id?: string | null;
  reasoning?: string | null;
  /** Older spelling of `reasoning`. */
  reasoning_content?: string | null;
  /** Tools attached to a developer message (vLLM extension); templates see `null` when absent. */
  tools?: readonly ChatTool[] | null;
}

export interface ChatTool {
  type: "function";
  function: { name: string; description?: string; parameters?: object; strict?: boolean };
}

export type ReasoningEffort = "low" | "medium" | "high";
