/**
 * Reasoning text apart from the answer, for models that think inside `<think>…</think>`
 * (DeepSeek-R1 and its distills, QwQ, Qwen3). One streaming parser serves the whole response too,
 * so a stream and a plain response always split the same text the same way.
 *
 * Where the output starts is known before it is read: a prompt whose generation prompt opened a
 * think block (`<think>` after its last `</think>`, as R1-distill and Qwen3-thinking templates do)
 * starts the output in reasoning; so does the `deepseek_r1` parser always (the original R1 thinks
 * without an opening tag). Otherwise an output that opens with `<think>` (after whitespace) starts
 * reasoning, and anything else is the answer. Reasoning ends at the first `</think>`; after it,
 * everything is answer, think tags included. A tag split across deltas is held back until it is
 * told apart from text.
 */
import { THINK_CLOSE, THINK_OPEN } from "../../core/structured/constraint-spec.ts";
import type { ReasoningParserName } from "../../models/registry/types.ts";

export { THINK_CLOSE, THINK_OPEN };

export type ReasoningPart = { kind: "reasoning" | "content"; text: string };

/** Whether a rendered prompt leaves a think block open for the output to continue. */
export function promptOpensThinking(prompt: string): boolean {
  const open = prompt.lastIndexOf(THINK_OPEN);
  return open >= 0 && open > prompt.lastIndexOf(THINK_CLOSE);
}

/** Whether the output of `parser` on a prompt starts inside reasoning. */
export function startsInReasoning(parser: ReasoningParserName, prompt: string): boolean {
  return parser === "deepseek_r1" || promptOpensThinking(prompt);
}

/** The longest suffix of `text` that is a proper prefix of `tag` (text that may still become it). */
function partialTag(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--)
    if (tag.startsWith(text.slice(-n))) return n;
  return 0;
}

export class ThinkStreamParser {
  /** "start": nothing decided yet (leading whitespace, or part of an opening tag, is held). */
  private state: "start" | "reasoning" | "content";
  private held = "";
  private readonly startsInReasoning: boolean;
  /** Whether any reasoning was seen (an empty think block counts). */
  reasoned = false;

  constructor(startsInReasoning: boolean) {
    this.startsInReasoning = startsInReasoning;
    this.state = "start";
  }

  push(text: string): ReasoningPart[] {
    const out: ReasoningPart[] = [];
    let rest = this.held + text;
    this.held = "";
    if (this.state === "start") {
      const lead = rest.length - rest.trimStart().length;
      const body = rest.slice(lead);
      if (body.startsWith(THINK_OPEN)) {
        this.state = "reasoning";
        this.reasoned = true;
        rest = body.slice(THINK_OPEN.length);
      } else if (body.length < THINK_OPEN.length && THINK_OPEN.startsWith(body)) {
        // Whitespace alone, or the start of an opening tag: not decided yet.
        this.held = rest;
        return out;
      } else {
        this.state = this.startsInReasoning ? "reasoning" : "content";
        this.reasoned ||= this.startsInReasoning;
      }
    }
    if (this.state === "reasoning") {
      const end = rest.indexOf(THINK_CLOSE);
      if (end < 0) {
        const keep = partialTag(rest, THINK_CLOSE);
        this.held = rest.slice(rest.length - keep);
        if (rest.length > keep) out.push({ kind: "reasoning", text: rest.slice(0, rest.length - keep) });
        return out;
      }
      if (end > 0) out.push({ kind: "reasoning", text: rest.slice(0, end) });
      this.state = "content";
      rest = rest.slice(end + THINK_CLOSE.length);
    }
    if (rest.length > 0) out.push({ kind: "content", text: rest });
    return out;
  }

  /** The output ended: what was held back is text of the part it was in. */
  finish(): ReasoningPart[] {
    const held = this.held;
    this.held = "";
    if (held === "") return [];
    if (this.state === "start") {
      this.state = this.startsInReasoning ? "reasoning" : "content";
      this.reasoned ||= this.startsInReasoning;
    }
    return [{ kind: this.state === "reasoning" ? "reasoning" : "content", text: held }];
  }
}

/**
 * A whole output split: reasoning null when there was none, content null when the output ended
 * inside reasoning (a `length` finish while thinking) or had nothing after it.
 */
export function splitReasoning(
  output: string,
  startsInReasoning: boolean,
): { reasoning: string | null; content: string | null } {
  const parser = new ThinkStreamParser(startsInReasoning);
  const parts = [...parser.push(output), ...parser.finish()];
  const join = (kind: ReasoningPart["kind"]) =>
    parts
      .filter((p) => p.kind === kind)
      .map((p) => p.text)
      .join("");
  const content = join("content");
  return {
    reasoning: parser.reasoned ? join("reasoning") : null,
    content: content === "" && parser.reasoned ? null : content,
  };
}
