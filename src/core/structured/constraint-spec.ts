/**
 * What a structured-output request asks the engine to enforce, as plain data (it crosses the
 * worker boundary inside the EngineRequest). The protocol layer builds it from `structured_outputs`
 * or `response_format`; the worker compiles it into a grammar over the model's vocabulary.
 */
export type StructuredConstraint = ConstraintKind & {
  /**
   * A reasoning model's output: the constraint binds only what follows its think block, which is
   * free text up to `</think>` — already open when the prompt opened it (`opened`), else opened by
   * the output's own `<think>` or skipped. The answer is still always inside the language.
   */
  afterThinking?: { opened: boolean };
};

type ConstraintKind =
  /** A JSON Schema (as JSON text); `anyWhitespace` false forces compact output. */
  | { kind: "json_schema"; schema: string; anyWhitespace: boolean }
  /** Any JSON object. */
  | { kind: "json_object"; anyWhitespace: boolean }
  /** The whole output matches the regular expression. */
  | { kind: "regex"; pattern: string }
  /** The output is exactly one of the strings. */
  | { kind: "choice"; choices: string[] }
  /** An EBNF / GBNF grammar whose entry rule is `root`. */
  | { kind: "grammar"; grammar: string }
  /** XGrammar's structural tag (JSON text). */
  | { kind: "structural_tag"; structuralTag: string };

/**
 * A constraint as a request states it: a JSON kind may leave `anyWhitespace` unset, and the served
 * model's default decides (jsonWhitespace). Only the engine's StructuredConstraint crosses to a worker.
 */
export type RequestedConstraint = StructuredConstraint extends infer C
  ? C extends { anyWhitespace: boolean }
    ? Omit<C, "anyWhitespace"> & { anyWhitespace?: boolean }
    : C
  : never;

/**
 * The one rule for whitespace inside JSON: what the request says (chat's
 * `structured_outputs.disable_any_whitespace`), else the model's default (`structured_outputs.
 * disable_any_whitespace` in its ortserve.json), else any whitespace (XGrammar's default).
 */
export function jsonWhitespace(c: RequestedConstraint, modelCompact: boolean): StructuredConstraint {
  if (c.kind !== "json_schema" && c.kind !== "json_object") return c;
  return { ...c, anyWhitespace: c.anyWhitespace ?? !modelCompact };
}

/** The tags a reasoning model's think block is written between (the protocol layer reads them from here). */
export const THINK_OPEN = "<think>";
export const THINK_CLOSE = "</think>";

/** The request field a constraint came from, for error messages. */
export function constraintField(c: StructuredConstraint): string {
  switch (c.kind) {
    case "json_schema":
      return "structured_outputs.json";
    case "json_object":
      return "structured_outputs.json_object";
    default:
      return `structured_outputs.${c.kind}`;
  }
}

/** One EBNF rule text for a literal string (XGrammar escapes). */
export function ebnfString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (cp < 0x20 || cp === 0x7f) out += `\\u${cp.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}
