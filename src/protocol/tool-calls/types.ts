/** What a tool-call parser reads from the model's text, and how the responses use it. */

/** A call as parsed: the function's name and its arguments as JSON text. */
export interface ParsedToolCall {
  name: string;
  arguments: string;
}

/** One piece of parsed output, in text order: content, or a whole call. */
export type ToolCallOutput =
  | { content: string; call?: undefined }
  | { call: ParsedToolCall; content?: undefined };

export interface ToolParserOptions {
  /** The request's function names; a call of any other name stays content. */
  toolNames: ReadonlySet<string>;
  /** parallel_tool_calls: false keeps the first call only. */
  parallel: boolean;
}

/** Fed the output text in pieces; gives out content as soon as it is known not to be a call. */
export interface ToolCallStreamParser {
  push(text: string): ToolCallOutput[];
  finish(): ToolCallOutput[];
  readonly callCount: number;
}
