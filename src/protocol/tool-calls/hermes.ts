/**
 * The Hermes tool-call format: each call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
 * in the model's text. One incremental parser serves both responses: a stream feeds it deltas,
 * a full response feeds it the whole text at once, so both read the same calls and content.
 *
 * A block becomes a call only when it closes, its body is a JSON object, its name is one of the
 * request's tools and its arguments are an object; anything else (an unclosed tag, bad JSON, an
 * unknown name) stays in the content as the model wrote it. The arguments are the model's own
 * JSON text where the body has the usual shape `{"name": ..., "arguments": ...}` (so streamed
 * pieces and the full response agree), re-serialized otherwise. With `streamArguments` (forced
 * calls, whose grammar keeps them well formed) a call starts as soon as its name is read and its
 * arguments go out as they arrive. Text that may be the start of a tag
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
  /** The arguments given out so far of the call being streamed, when one is. */
  private streamed: string | undefined;

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
      if (end < 0) {
        if (this.options.streamArguments) this.streamPart(out);
        return out;
      }
      const body = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + TOOL_CALL_END.length);
      this.inCall = false;
      const call = this.readCall(body);
      if (this.streamed !== undefined) {
        // Started already: the rest of its arguments (a well-formed call's text extends them).
        const rest = call?.arguments.startsWith(this.streamed)
          ? call.arguments.slice(this.streamed.length)
          : "";
        if (rest) out.push({ kind: "arguments", arguments: rest });
        this.streamed = undefined;
      } else if (!call) this.content(out, TOOL_CALL_BEGIN + body + TOOL_CALL_END);
      // parallel_tool_calls=false: the first call only; later ones are dropped.
      else if (this.options.parallel || this.calls === 0) {
        this.calls++;
        out.push({ kind: "call", call });
      }
    }
  }

  /** The end of the text: an unclosed call and held-back text are content. */
  finish(): ToolCallOutput[] {
    const out: ToolCallOutput[] = [];
    // A call that started streaming stays cut short; anything else unfinished is content.
    if (this.streamed === undefined)
      this.content(out, this.inCall ? TOOL_CALL_BEGIN + this.buffer : this.buffer);
    this.streamed = undefined;
    this.buffer = "";
    this.inCall = false;
    if (this.calls === 0 && this.pendingSpace) out.push({ kind: "content", content: this.pendingSpace });
    this.pendingSpace = "";
    return out;
  }

  /** Trailing whitespace waits: before a call it is a separator, otherwise it goes out later. */
  private content(out: ToolCallOutput[], text: string): void {
    if (text === "") return;
    const joined = this.pendingSpace + text;
    const body = joined.trimEnd();
    this.pendingSpace = joined.slice(body.length);
    if (body !== "") out.push({ kind: "content", content: body });
  }

  /** An open call's start, once its name is read, then as much of its arguments as is sure. */
  private streamPart(out: ToolCallOutput[]): void {
    const body = this.buffer.slice(0, this.buffer.length - partialTagLength(this.buffer, TOOL_CALL_END));
    const head = CALL_HEAD.exec(body);
    if (!head) return;
    if (this.streamed === undefined) {
      const name = jsonString(head[1]!);
      if (name === undefined || !this.options.toolNames.has(name)) return;
      if (!this.options.parallel && this.calls > 0) return;
      this.calls++;
      this.streamed = "";
      out.push({ kind: "start", name });
    }
    // Held back: trailing whitespace and the last "}", which may close the call's object.
    let sure = body.slice(head[0].length).trimEnd();
    if (sure.endsWith("}")) sure = sure.slice(0, -1).trimEnd();
    if (sure.length > this.streamed.length && sure.startsWith(this.streamed)) {
      out.push({ kind: "arguments", arguments: sure.slice(this.streamed.length) });
      this.streamed = sure;
    }
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
    return { name: value.name, arguments: rawArguments(body) ?? JSON.stringify(args) };
  }
}

/** A body's beginning up to its arguments: `{"name": "<name>", "arguments": `. */
const CALL_HEAD = /^\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*/;

function jsonString(text: string): string | undefined {
  try {
    return JSON.parse(text) as string;
  } catch {
    return undefined;
  }
}

/** The arguments as the model wrote them, when the body is `{"name": ..., "arguments": {...}}`. */
function rawArguments(body: string): string | undefined {
  const head = CALL_HEAD.exec(body);
  if (!head) return undefined;
  const rest = body.slice(head[0].length).trimEnd();
  if (!rest.endsWith("}")) return undefined;
  const raw = rest.slice(0, -1).trimEnd();
  try {
    return isObject(JSON.parse(raw)) ? raw : undefined;
  } catch {
    return undefined;
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
