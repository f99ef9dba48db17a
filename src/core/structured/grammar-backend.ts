/**
 * The structured-output backend of one model (one vocabulary): XGrammar's tokenizer info and
 * grammar compiler, made once, and a bounded LRU of compiled grammars keyed by the constraint.
 * A constraint is checked before it is compiled (fail closed: check-constraint.ts), then parsed
 * by a separate, disposable instance of the module — XGrammar reports bad input by aborting, which leaves an instance
 * unusable — and only then compiled by the instance that holds the vocabulary.
 */
import { checkSupported, refused } from "./check-constraint.ts";
import { ebnfString, type StructuredConstraint } from "./constraint-spec.ts";
import { GrammarConstraint } from "./grammar-constraint.ts";
import { Lru } from "./lru.ts";
import { forBackend } from "./regex-support.ts";
import { withBackendPatterns } from "./schema-support.ts";
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

function choiceGrammar(choices: readonly string[]): string {
  return `root ::= ${choices.map(ebnfString).join(" | ")}`;
}

function regexTag(pattern: string): string {
  return JSON.stringify({ type: "structural_tag", format: { type: "regex", pattern: forBackend(pattern) } });
}

function schemaText(schema: string): string {
  return JSON.stringify(withBackendPatterns(JSON.parse(schema)));
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

async function parseWith(xg: XGrammar, c: StructuredConstraint) {
  switch (c.kind) {
    case "json_schema":
      return xg.Grammar.fromJSONSchema(schemaText(c.schema), ...jsonArgs(c.anyWhitespace), true);
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

async function compileWith({ compiler }: Instance, c: StructuredConstraint): Promise<CompiledGrammar> {
  switch (c.kind) {
    case "json_schema":
      return compiler.compileJSONSchema(schemaText(c.schema), ...jsonArgs(c.anyWhitespace), true);
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
