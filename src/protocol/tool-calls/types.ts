/** What a tool-call parser reads from the model's text, and how the responses use it. */

/** A call as parsed: the function's name and its arguments as JSON text. */
export interface ParsedToolCall {
  name: string;
  arguments: string;
}

/**
 * One piece of parsed output, in text order: content, a whole call, or (when arguments stream)
 * a call's start and then pieces of its arguments.
 */
export type ToolCallOutput =
  | { kind: "content"; content: string }
  | { kind: "call"; call: ParsedToolCall }
  | { kind: "start"; name: string }
  | { kind: "arguments"; arguments: string };

export interface ToolParserOptions {
  /** The request's function names; a call of any other name stays content. */
  toolNames: ReadonlySet<string>;
  /** parallel_tool_calls: false keeps the first call only. */
  parallel: boolean;
  /**
   * Give out a call's arguments as they arrive instead of when the call closes. Only for output a
   * grammar keeps well formed (a forced call): a call already started cannot turn into content.
   */
  streamArguments?: boolean;
}

/** Fed the output text in pieces; gives out content as soon as it is known not to be a call. */
export interface ToolCallStreamParser {
  push(text: string): ToolCallOutput[];
  finish(): ToolCallOutput[];
  readonly callCount: number;
}
