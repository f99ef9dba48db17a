/**
 * The structured-output backend of one model (one vocabulary): XGrammar's tokenizer info and
 * grammar compiler, made once, and a bounded LRU of compiled grammars keyed by the constraint.
 * A constraint is checked before it is compiled (fail closed: check-constraint.ts), then parsed
 * by a separate, disposable instance of the module — XGrammar reports bad input by aborting, which leaves an instance
 * unusable — and only then compiled by the instance that holds the vocabulary.
 */
import { checkSupported, refused } from "./check-constraint.ts";
import { CompileBudget } from "./compile-budget.ts";
import type { StructuredConstraint } from "./constraint-spec.ts";
import { compileWith, type Instance, loadInstance, parseWith } from "./grammar-compile.ts";
import { GrammarConstraint } from "./grammar-constraint.ts";
import { Lru } from "./lru.ts";
import type { GrammarVocabulary } from "./vocabulary.ts";
import {
  abortReason,
  type CompiledGrammar,
  captureErrors,
  loadXGrammar,
  type XGrammar,
} from "./xgrammar-module.ts";

export interface CompileResult {
  compiled: CompiledGrammar;
  /** Milliseconds spent compiling; 0 on a cache hit. */
  compileMs: number;
}

export const DEFAULT_GRAMMAR_CACHE = 64;

export interface GrammarBackendOptions {
  /** Compiled grammars kept (LRU). */
  cacheSize?: number;
  /** Milliseconds a new constraint may take to compile (see compile-budget.ts); 0: no budget. */
  compileTimeoutMs?: number;
}

export class GrammarBackend {
  private readonly vocab: GrammarVocabulary;
  private instance: Promise<Instance> | undefined;
  private parser: Promise<XGrammar> | undefined;
  private readonly cache: Lru<string, CompiledGrammar>;

  private readonly budget: CompileBudget | undefined;

  constructor(vocab: GrammarVocabulary, options: GrammarBackendOptions = {}) {
    this.vocab = vocab;
    this.cache = new Lru(options.cacheSize ?? DEFAULT_GRAMMAR_CACHE, (g) => g.dispose());
    const timeout = options.compileTimeoutMs ?? 0;
    this.budget = timeout > 0 ? new CompileBudget(vocab, timeout) : undefined;
  }

  get cachedGrammars(): number {
    return this.cache.size;
  }

  private load(): Promise<Instance> {
    this.instance ??= loadInstance(this.vocab);
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
    // Compiled first where a slow compile stalls nothing (and refused if it overruns).
    await this.budget?.check(c, key);
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

  /** Ends the compile-budget thread, if one was started. */
  close(): Promise<void> {
    return this.budget?.close() ?? Promise.resolve();
  }
}
