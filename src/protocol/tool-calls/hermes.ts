/**
 * The Hermes tool-call format: each call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
 * in the model's text. One incremental parser serves both responses: a stream feeds it deltas,
 * a full response feeds it the whole text at once, so both read the same calls and content.
 *
 * A block becomes a call only when it closes, its body is a JSON object, its name is one of the
 * request's tools and its arguments are an object; anything else (an unclosed tag, bad JSON, an
 * unknown name) stays in the content as the model wrote it. Text that may be the start of a tag
 * is held back until it is known not to be one, and trailing whitespace until non-whitespace
 * follows, so whitespace around calls never becomes content (without calls, the text is returned
 * exactly as written).
 */
import { TOOL_CALL_BEGIN, TOOL_CALL_END } from "./tool-choice.ts";
import type { ParsedToolCall, ToolCallOutput, ToolCallStreamParser, ToolParserOptions } from "./types.ts";

export class HermesToolCallParser implements ToolCallStreamParser {
  private readonly options: ToolParserOptions;
  /** Text received but not yet given out (a possible tag start, or a call body). */
  private buffer = "";
  private inCall = false;
  /** Trailing whitespace waiting for more content (dropped at the end when calls were made). */
  private pendingSpace = "";
  private calls = 0;

  constructor(options: ToolParserOptions) {
    this.options = options;
  }

  get callCount(): number {
    return this.calls;
  }

  push(text: string): ToolCallOutput[] {
    const out: ToolCallOutput[] = [];
    this.buffer += text;
    for (;;) {
      if (!this.inCall) {
        const begin = this.buffer.indexOf(TOOL_CALL_BEGIN);
        if (begin < 0) {
          const keep = partialTagLength(this.buffer, TOOL_CALL_BEGIN);
          this.content(out, this.buffer.slice(0, this.buffer.length - keep));
          this.buffer = this.buffer.slice(this.buffer.length - keep);
          return out;
        }
        this.content(out, this.buffer.slice(0, begin));
        this.buffer = this.buffer.slice(begin + TOOL_CALL_BEGIN.length);
        this.inCall = true;
      }
      const end = this.buffer.indexOf(TOOL_CALL_END);
      if (end < 0) return out;
      const body = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + TOOL_CALL_END.length);
      this.inCall = false;
      const call = this.readCall(body);
      if (!call) this.content(out, TOOL_CALL_BEGIN + body + TOOL_CALL_END);
      // parallel_tool_calls=false: the first call only; later ones are dropped.
      else if (this.options.parallel || this.calls === 0) {
        this.calls++;
        out.push({ call });
      }
    }
  }

  /** The end of the text: an unclosed call and held-back text are content. */
  finish(): ToolCallOutput[] {
    const out: ToolCallOutput[] = [];
    this.content(out, this.inCall ? TOOL_CALL_BEGIN + this.buffer : this.buffer);
    this.buffer = "";
    this.inCall = false;
    if (this.calls === 0 && this.pendingSpace) out.push({ content: this.pendingSpace });
    this.pendingSpace = "";
    return out;
  }

  /** Trailing whitespace waits: before a call it is a separator, otherwise it goes out later. */
  private content(out: ToolCallOutput[], text: string): void {
    if (text === "") return;
    const joined = this.pendingSpace + text;
    const body = joined.trimEnd();
    this.pendingSpace = joined.slice(body.length);
    if (body !== "") out.push({ content: body });
  }

  private readCall(body: string): ParsedToolCall | undefined {
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch {
      return undefined;
    }
    if (!isObject(value) || typeof value.name !== "string") return undefined;
    if (!this.options.toolNames.has(value.name)) return undefined;
    // Some models write "parameters" for "arguments"; an omitted one is an empty argument list.
    const args = value.arguments ?? value.parameters ?? {};
    if (!isObject(args)) return undefined;
    return { name: value.name, arguments: JSON.stringify(args) };
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** How many characters at the end of `text` could begin `tag`. */
function partialTagLength(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--)
    if (tag.startsWith(text.slice(text.length - n))) return n;
  return 0;
}
