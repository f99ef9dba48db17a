/**
 * An evaluation dataset: JSONL, one item a line — a `prompt` (text, continued as is) or `messages`
 * (chat, through the model's template), and either an expected `answer` string (exact_match,
 * contains) or `choices` with `answer` the right one's index or text (multiple-choice accuracy by
 * log-likelihood), or a JSON Schema as `schema` (json_valid: the greedy output parses as JSON and
 * validates against it), optionally with `constrained` (true: generated with the schema enforced;
 * default: the caller's choice, `ortserve eval --constrained`).
 */
import type { ChatMessage } from "../chat/types.ts";
import { checkSupported } from "../core/structured/check-constraint.ts";
import type { StructuredConstraint } from "../core/structured/constraint-spec.ts";
import { type JsonValidator, jsonSchemaValidator } from "./json-valid.ts";

export type EvalPrompt = { text: string } | { messages: ChatMessage[] };

export type EvalItem =
  | { index: number; prompt: EvalPrompt; kind: "answer"; answer: string }
  | { index: number; prompt: EvalPrompt; kind: "choices"; choices: string[]; answer: number }
  | {
      index: number;
      prompt: EvalPrompt;
      kind: "json";
      schema: unknown;
      /** Generate with the schema enforced (structured outputs). */
      constrained: boolean;
      validate: JsonValidator;
    };

export interface DatasetOptions {
  /** Whether schema items without their own `constrained` are generated with the schema enforced. */
  constrained?: boolean;
}

/**
 * The structured-output constraint of a constrained schema item: compact JSON, so an output
 * cannot spend its tokens on whitespace.
 */
export function schemaConstraint(schema: unknown): StructuredConstraint {
  return { kind: "json_schema", schema: JSON.stringify(schema), anyWhitespace: false };
}

function fail(line: number, problem: string): never {
  throw new Error(`line ${line}: ${problem}`);
}

export function parseDataset(text: string, options: DatasetOptions = {}): EvalItem[] {
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
    const known = new Set(["prompt", "messages", "answer", "choices", "schema", "constrained"]);
    const unknown = Object.keys(v).filter((k) => !known.has(k));
    if (unknown.length) fail(line, `unknown field(s) ${unknown.join(", ")}`);
    let prompt: EvalPrompt;
    if (typeof v.prompt === "string" && v.messages === undefined) prompt = { text: v.prompt };
    else if (Array.isArray(v.messages) && v.prompt === undefined)
      prompt = { messages: v.messages as ChatMessage[] };
    else fail(line, "needs exactly one of prompt (a string) or messages (an array)");
    const index = items.length;
    if (v.schema !== undefined || v.constrained !== undefined) {
      items.push(schemaItem(line, index, prompt, v, options));
      return;
    }
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

function schemaItem(
  line: number,
  index: number,
  prompt: EvalPrompt,
  v: Record<string, unknown>,
  options: DatasetOptions,
): EvalItem {
  if (v.schema === undefined) fail(line, "constrained needs a schema");
  if (v.answer !== undefined || v.choices !== undefined)
    fail(line, "a schema item has no answer or choices (it is scored by json_valid)");
  if (v.constrained !== undefined && typeof v.constrained !== "boolean")
    fail(line, "constrained must be true or false");
  let validate: JsonValidator;
  try {
    validate = jsonSchemaValidator(v.schema);
  } catch (err) {
    fail(line, `schema: ${(err as Error).message}`);
  }
  const constrained = (v.constrained as boolean | undefined) ?? options.constrained ?? false;
  if (constrained)
    try {
      checkSupported(schemaConstraint(v.schema));
    } catch (err) {
      // The message names the request field (structured_outputs.json); here the field is `schema`.
      fail(
        line,
        `schema cannot be enforced: ${(err as Error).message.replace(/^structured_outputs\.json: /, "")}`,
      );
    }
  return { index, prompt, kind: "json", schema: v.schema, constrained, validate };
}
