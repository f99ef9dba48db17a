/**
 * The structured-output backend of one model (one vocabulary): XGrammar's tokenizer info and
 * grammar compiler, made once, and a bounded LRU of compiled grammars keyed by the constraint.
 * A constraint is checked before it is compiled (fail closed: what the backend would not enforce
 * is refused, see schema-support.ts and regex-support.ts), then parsed by a separate, disposable
 * instance of the module — XGrammar reports bad input by aborting, which leaves an instance
 * unusable — and only then compiled by the instance that holds the vocabulary.
 */
import { RequestError } from "../request-error.ts";
import { constraintField, ebnfString, type StructuredConstraint } from "./constraint-spec.ts";
import { GrammarConstraint } from "./grammar-constraint.ts";
import { Lru } from "./lru.ts";
import { unsupportedRegexFeature } from "./regex-support.ts";
import { checkJsonSchema, UnsupportedSchema } from "./schema-support.ts";
import type { GrammarVocabulary } from "./vocabulary.ts";
import {
  abortReason,
  type CompiledGrammar,
  captureErrors,
  type GrammarCompiler,
  loadXGrammar,
  type TokenizerInfo,
  type XGrammar,
} from "./xgrammar-module.ts";

interface Instance {
  xg: XGrammar;
  info: TokenizerInfo;
  compiler: GrammarCompiler;
}

export interface CompileResult {
  compiled: CompiledGrammar;
  /** Milliseconds spent compiling; 0 on a cache hit. */
  compileMs: number;
}

export const DEFAULT_GRAMMAR_CACHE = 64;

export class GrammarBackend {
  private readonly vocab: GrammarVocabulary;
  private instance: Promise<Instance> | undefined;
  private parser: Promise<XGrammar> | undefined;
  private readonly cache: Lru<string, CompiledGrammar>;

  constructor(vocab: GrammarVocabulary, cacheSize = DEFAULT_GRAMMAR_CACHE) {
    this.vocab = vocab;
    this.cache = new Lru(cacheSize, (g) => g.dispose());
  }

  get cachedGrammars(): number {
    return this.cache.size;
  }

  private load(): Promise<Instance> {
    this.instance ??= (async () => {
      const xg = await loadXGrammar();
      const v = this.vocab;
      const info = await xg.TokenizerInfo.createTokenizerInfo(
        v.encodedVocab,
        v.vocabType,
        v.prependSpace,
        v.vocabSize,
        v.stopTokenIds,
      );
      // Compiled grammars are cached here, bounded; XGrammar's own cache would grow without limit.
      const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
      return { xg, info, compiler };
    })();
    this.instance.catch(() => {
      this.instance = undefined;
    });
    return this.instance;
  }

  /** Checks, parses and compiles a constraint (or returns the cached grammar); RequestError when refused. */
  async compile(c: StructuredConstraint): Promise<CompileResult> {
    const key = JSON.stringify(c);
    const hit = this.cache.get(key);
    if (hit) return { compiled: hit, compileMs: 0 };
    checkSupported(c);
    await this.parse(c);
    const inst = await this.load();
    const t0 = performance.now();
    const r = await captureErrors(() => compileWith(inst, c));
    if (r.error !== undefined || !r.value) {
      // The instance that aborted is not used again; cached grammars go with it.
      this.instance = undefined;
      this.cache.clear();
      throw refused(c, abortReason(r.messages, r.error));
    }
    const compileMs = performance.now() - t0;
    this.cache.set(key, r.value);
    return { compiled: r.value, compileMs };
  }

  /** One constraint per choice, each with its own matcher in the grammar's start state. */
  async constraints(c: StructuredConstraint, n: number): Promise<GrammarConstraint[]> {
    const { compiled } = await this.compile(c);
    const inst = await this.load();
    const out: GrammarConstraint[] = [];
    for (let i = 0; i < n; i++)
      out.push(
        new GrammarConstraint(
          await inst.xg.GrammarMatcher.createGrammarMatcher(compiled, this.vocab.stopTokenIds),
        ),
      );
    return out;
  }

  /** Parses the constraint's text with the disposable instance, so syntax errors abort only it. */
  private async parse(c: StructuredConstraint): Promise<void> {
    this.parser ??= loadXGrammar();
    const xg = await this.parser;
    const r = await captureErrors(async () => {
      const g = await parseWith(xg, c);
      g.dispose();
    });
    if (r.error !== undefined) {
      this.parser = undefined;
      throw refused(c, abortReason(r.messages, r.error));
    }
  }
}

function refused(c: StructuredConstraint, why: string): RequestError {
  const field = constraintField(c);
  return new RequestError("invalid_request", `${field}: ${why}`, field);
}

/** The fail-closed checks of the constraint's own text (no backend involved). */
export function checkSupported(c: StructuredConstraint): void {
  try {
    if (c.kind === "json_schema") checkJsonSchema(parseJson(c.schema, "the schema"));
    else if (c.kind === "regex") {
      const problem = unsupportedRegexFeature(c.pattern);
      if (problem) throw refused(c, `not supported: ${problem}`);
    } else if (c.kind === "choice") {
      if (c.choices.length === 0) throw refused(c, "needs at least one string");
    } else if (c.kind === "structural_tag")
      checkStructuralTag(parseJson(c.structuralTag, "the structural tag"));
  } catch (err) {
    if (err instanceof UnsupportedSchema) throw refused(c, `not supported: ${err.message}`);
    throw err;
  }
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UnsupportedSchema("", `${what} is not valid JSON (${(err as Error).message})`);
  }
}

/** Every schema and regex inside a structural tag passes the same checks. */
function checkStructuralTag(tag: unknown): void {
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) {
      for (const x of v) visit(x);
      return;
    }
    if (typeof v !== "object" || v === null) return;
    const o = v as Record<string, unknown>;
    if (o.type === "json_schema" || o.type === "qwen_xml_parameter") checkJsonSchema(o.json_schema);
    if (o.type === "regex") {
      const problem = unsupportedRegexFeature(String(o.pattern));
      if (problem) throw new UnsupportedSchema("", `regex with ${problem}`);
    }
    // The legacy form: structures of {begin, schema, end}.
    if ("begin" in o && "schema" in o)
      checkJsonSchema(typeof o.schema === "string" ? parseJson(o.schema, "a structure's schema") : o.schema);
    for (const [k, x] of Object.entries(o)) if (k !== "json_schema" && k !== "schema") visit(x);
  };
  visit(tag);
}

function choiceGrammar(choices: readonly string[]): string {
  return `root ::= ${choices.map(ebnfString).join(" | ")}`;
}

function regexTag(pattern: string): string {
  return JSON.stringify({ type: "structural_tag", format: { type: "regex", pattern } });
}

/** Compact separators when any-whitespace is off. */
function jsonArgs(anyWhitespace: boolean): [boolean, number, [string, string] | undefined] {
  return anyWhitespace ? [true, 2, undefined] : [false, -1, [",", ":"]];
}

async function parseWith(xg: XGrammar, c: StructuredConstraint) {
  switch (c.kind) {
    case "json_schema":
      return xg.Grammar.fromJSONSchema(c.schema, ...jsonArgs(c.anyWhitespace), true);
    case "json_object":
      return xg.Grammar.fromJSONSchema('{"type":"object"}', ...jsonArgs(c.anyWhitespace), false);
    case "regex":
      return xg.Grammar.fromStructuralTag(regexTag(c.pattern));
    case "choice":
      return xg.Grammar.fromEBNF(choiceGrammar(c.choices));
    case "grammar":
      return xg.Grammar.fromEBNF(c.grammar);
    case "structural_tag":
      return xg.Grammar.fromStructuralTag(c.structuralTag);
  }
}

async function compileWith({ compiler }: Instance, c: StructuredConstraint): Promise<CompiledGrammar> {
  switch (c.kind) {
    case "json_schema":
      return compiler.compileJSONSchema(c.schema, ...jsonArgs(c.anyWhitespace), true);
    case "json_object":
      return compiler.compileJSONSchema('{"type":"object"}', ...jsonArgs(c.anyWhitespace), false);
    case "regex":
      return compiler.compileStructuralTag(regexTag(c.pattern));
    case "choice":
      return compiler.compileGrammar(choiceGrammar(c.choices));
    case "grammar":
      return compiler.compileGrammar(c.grammar);
    case "structural_tag":
      return compiler.compileStructuralTag(c.structuralTag);
  }
}
