/**
 * An evaluation dataset: JSONL, one item a line — a `prompt` (text, continued as is) or `messages`
 * (chat, through the model's template), and either an expected `answer` string (exact_match,
 * contains) or `choices` with `answer` the right one's index or text (multiple-choice accuracy by
 * log-likelihood).
 */
import type { ChatMessage } from "../chat/types.ts";

export type EvalPrompt = { text: string } | { messages: ChatMessage[] };

export type EvalItem =
  | { index: number; prompt: EvalPrompt; kind: "answer"; answer: string }
  | { index: number; prompt: EvalPrompt; kind: "choices"; choices: string[]; answer: number };

function fail(line: number, problem: string): never {
  throw new Error(`line ${line}: ${problem}`);
}

export function parseDataset(text: string): EvalItem[] {
  const items: EvalItem[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = i + 1;
    if (raw.trim() === "") return;
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(raw) as Record<string, unknown>;
    } catch (err) {
      fail(line, `not JSON (${(err as Error).message})`);
    }
    if (typeof v !== "object" || v === null || Array.isArray(v)) fail(line, "not a JSON object");
    const known = new Set(["prompt", "messages", "answer", "choices"]);
    const unknown = Object.keys(v).filter((k) => !known.has(k));
    if (unknown.length) fail(line, `unknown field(s) ${unknown.join(", ")}`);
    let prompt: EvalPrompt;
    if (typeof v.prompt === "string" && v.messages === undefined) prompt = { text: v.prompt };
    else if (Array.isArray(v.messages) && v.prompt === undefined)
      prompt = { messages: v.messages as ChatMessage[] };
    else fail(line, "needs exactly one of prompt (a string) or messages (an array)");
    const index = items.length;
    if (v.choices === undefined) {
      if (typeof v.answer !== "string") fail(line, "answer must be a string (or give choices)");
      items.push({ index, prompt, kind: "answer", answer: v.answer });
      return;
    }
    const choices = v.choices;
    if (!Array.isArray(choices) || choices.length < 2 || choices.some((c) => typeof c !== "string"))
      fail(line, "choices must be an array of at least two strings");
    const answer =
      typeof v.answer === "number" ? v.answer : typeof v.answer === "string" ? choices.indexOf(v.answer) : -1;
    if (!Number.isInteger(answer) || answer < 0 || answer >= choices.length)
      fail(line, "answer must be the index or the text of one of the choices");
    items.push({ index, prompt, kind: "choices", choices: choices as string[], answer });
  });
  if (items.length === 0) throw new Error("the dataset has no items");
  return items;
}
