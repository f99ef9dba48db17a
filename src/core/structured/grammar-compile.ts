/**
 * A constraint in XGrammar's terms: an instance holding a vocabulary's tokenizer info and
 * compiler, and each constraint kind parsed or compiled by it (schemas and regexes first
 * rewritten into the backend's reading). Shared by the engine's backend and the compile-budget
 * thread, so both compile exactly the same grammar.
 */
import { ebnfString, type StructuredConstraint, THINK_CLOSE, THINK_OPEN } from "./constraint-spec.ts";
import { spliceExtraNames, withSharedRules } from "./extra-names.ts";
import { spliceAnyOrder } from "./object-order.ts";
import { forBackend } from "./regex-support.ts";
import { backendJsonSchema, RANGE_SLOT, rangeRuleName, withBackendPatterns } from "./schema-support.ts";
import { hasEscapedSlash, withBothSlashForms } from "./slash-forms.ts";
import { spliceStrings } from "./string-length.ts";
import type { GrammarVocabulary } from "./vocabulary.ts";
import {
  type CompiledGrammar,
  type GrammarCompiler,
  loadXGrammar,
  type TokenizerInfo,
  type XGrammar,
} from "./xgrammar-module.ts";

export interface Instance {
  xg: XGrammar;
  info: TokenizerInfo;
  compiler: GrammarCompiler;
}

/** A fresh instance with the vocabulary's tokenizer info and a compiler over it. */
export async function loadInstance(v: GrammarVocabulary): Promise<Instance> {
  const xg = await loadXGrammar();
  const info = await xg.TokenizerInfo.createTokenizerInfo(
    v.encodedVocab,
    v.vocabType,
    v.prependSpace,
    v.vocabSize,
    v.stopTokenIds,
  );
  // Compiled grammars are cached by the caller, bounded; XGrammar's own cache would grow without limit.
  const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
  return { xg, info, compiler };
}

function choiceGrammar(choices: readonly string[]): string {
  return `root ::= ${choices.map(ebnfString).join(" | ")}`;
}

function regexTag(pattern: string): string {
  return JSON.stringify({ type: "structural_tag", format: { type: "regex", pattern: forBackend(pattern) } });
}

/**
 * A JSON Schema constraint as the backend's grammar: XGrammar's own, with each numeric range's
 * marker const replaced by its exact rule, each open object's extra key kept apart from its
 * declared names (schema-support.ts backendJsonSchema, extra-names.ts) and each fixed "/" taken in
 * both spellings (slash-forms.ts). Without any of these, the schema's text to compile directly.
 */
async function schemaGrammar(
  xg: XGrammar,
  c: { schema: string; anyWhitespace: boolean },
): Promise<{ ebnf: string } | { schemaText: string }> {
  const { schema, rangeRules, extraNames, objects, strings } = backendJsonSchema(JSON.parse(c.schema));
  const grammar = await xg.Grammar.fromJSONSchema(JSON.stringify(schema), ...jsonArgs(c.anyWhitespace), true);
  let ebnf: string;
  try {
    ebnf = grammar.toString();
  } finally {
    grammar.dispose();
  }
  const spliced = rangeRules.length + extraNames.length + objects.length + strings.length > 0;
  if (!spliced && !hasEscapedSlash(ebnf)) return { schemaText: JSON.stringify(schema) };
  rangeRules.forEach((rule, i) => {
    const literal = `"\\"${RANGE_SLOT}${i}\\""`;
    // A range in a definition nothing references is not in the grammar.
    if (ebnf.includes(literal)) ebnf = `${ebnf.replaceAll(literal, rangeRuleName(i))}\n${rule}`;
  });
  // A marker left anywhere else (inside a longer literal) would be generated as text: refuse.
  if (ebnf.includes(RANGE_SLOT)) throw new Error("a numeric range the grammar does not keep apart");
  extraNames.forEach((names, i) => {
    ebnf = spliceExtraNames(ebnf, i, names);
  });
  objects.forEach((slot, j) => {
    ebnf = spliceAnyOrder(ebnf, j, slot, c.anyWhitespace);
  });
  ebnf = withSharedRules(spliceStrings(ebnf, strings));
  return { ebnf: withBothSlashForms(ebnf) };
}

/** The structural tag with its schemas and regexes in the backend's reading, as on their own. */
function structuralTagText(tag: string): string {
  const visit = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(visit);
    if (typeof v !== "object" || v === null) return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = visit(x);
    if (out.type === "json_schema" || out.type === "qwen_xml_parameter")
      out.json_schema = withBackendPatterns(out.json_schema);
    if (out.type === "regex" && typeof out.pattern === "string") out.pattern = forBackend(out.pattern);
    if ("begin" in out && "schema" in out)
      out.schema =
        typeof out.schema === "string"
          ? JSON.stringify(withBackendPatterns(JSON.parse(out.schema)))
          : withBackendPatterns(out.schema);
    return out;
  };
  return JSON.stringify(visit(JSON.parse(tag)));
}

/** Compact separators when any-whitespace is off. */
function jsonArgs(anyWhitespace: boolean): [boolean, number, [string, string] | undefined] {
  return anyWhitespace ? [true, 2, undefined] : [false, -1, [",", ":"]];
}

/** The inner constraint's grammar as EBNF text (what XGrammar prints is what it parses). */
async function constraintEbnf(xg: XGrammar, c: StructuredConstraint): Promise<string> {
  // Spliced EBNF goes in as written: XGrammar prints a class of digits left out after a hex
  // escape run together ("\x1f0123"), which its parser reads back as one longer escape.
  if (c.kind === "json_schema") {
    const g = await schemaGrammar(xg, c);
    if ("ebnf" in g) return g.ebnf;
  }
  const g = await parseWith(xg, c);
  try {
    return g.toString();
  } finally {
    g.dispose();
  }
}

/**
 * The structural tag of a constraint behind a think block: any text up to `</think>`, then the
 * constraint's own grammar. When the prompt did not open the block, the output may open it with
 * `<think>` or answer at once.
 */
async function afterThinkingTag(xg: XGrammar, c: StructuredConstraint): Promise<string> {
  const { afterThinking, ...inner } = c;
  // A structural tag goes in as its own format: printed as EBNF, its tags' literal text is lost
  // (a forced tool call's grammar would take bare arguments and refuse the call itself).
  const answer =
    inner.kind === "structural_tag"
      ? tagFormat(structuralTagText(inner.structuralTag))
      : { type: "grammar", grammar: await constraintEbnf(xg, inner as StructuredConstraint) };
  const think = (begin: string) => ({ type: "tag", begin, content: { type: "any_text" }, end: THINK_CLOSE });
  const format = afterThinking!.opened
    ? { type: "sequence", elements: [think(""), answer] }
    : { type: "or", elements: [{ type: "sequence", elements: [think(THINK_OPEN), answer] }, answer] };
  return JSON.stringify({ type: "structural_tag", format });
}

/**
 * A structural tag's format; the legacy form (structures dispatched by triggers, free text
 * between them) as the triggered tags XGrammar reads it as.
 */
function tagFormat(tagText: string): unknown {
  const tag = JSON.parse(tagText) as {
    format?: unknown;
    structures?: { begin: string; schema: unknown; end: string }[];
    triggers?: string[];
  };
  if (tag.format !== undefined) return tag.format;
  return {
    type: "triggered_tags",
    triggers: tag.triggers ?? [],
    tags: (tag.structures ?? []).map((s) => ({
      type: "tag",
      begin: s.begin,
      content: {
        type: "json_schema",
        json_schema: typeof s.schema === "string" ? JSON.parse(s.schema) : s.schema,
      },
      end: s.end,
    })),
  };
}

export async function parseWith(xg: XGrammar, c: StructuredConstraint) {
  if (c.afterThinking) return xg.Grammar.fromStructuralTag(await afterThinkingTag(xg, c));
  switch (c.kind) {
    case "json_schema": {
      const g = await schemaGrammar(xg, c);
      if ("ebnf" in g) return xg.Grammar.fromEBNF(g.ebnf);
      return xg.Grammar.fromJSONSchema(g.schemaText, ...jsonArgs(c.anyWhitespace), true);
    }
    case "json_object":
      return xg.Grammar.fromJSONSchema('{"type":"object"}', ...jsonArgs(c.anyWhitespace), false);
    case "regex":
      return xg.Grammar.fromStructuralTag(regexTag(c.pattern));
    case "choice":
      return xg.Grammar.fromEBNF(choiceGrammar(c.choices));
    case "grammar":
      return xg.Grammar.fromEBNF(c.grammar);
    case "structural_tag":
      return xg.Grammar.fromStructuralTag(structuralTagText(c.structuralTag));
  }
}

export async function compileWith(
  { xg, compiler }: Instance,
  c: StructuredConstraint,
): Promise<CompiledGrammar> {
  if (c.afterThinking) return compiler.compileStructuralTag(await afterThinkingTag(xg, c));
  switch (c.kind) {
    case "json_schema": {
      const g = await schemaGrammar(xg, c);
      if ("ebnf" in g) return compiler.compileGrammar(g.ebnf);
      return compiler.compileJSONSchema(g.schemaText, ...jsonArgs(c.anyWhitespace), true);
    }
    case "json_object":
      return compiler.compileJSONSchema('{"type":"object"}', ...jsonArgs(c.anyWhitespace), false);
    case "regex":
      return compiler.compileStructuralTag(regexTag(c.pattern));
    case "choice":
      return compiler.compileGrammar(choiceGrammar(c.choices));
    case "grammar":
      return compiler.compileGrammar(c.grammar);
    case "structural_tag":
      return compiler.compileStructuralTag(structuralTagText(c.structuralTag));
  }
}
