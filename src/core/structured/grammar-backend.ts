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
  /** The instance `instance` resolved to, while it is the one in use (the cache's grammars are its). */
  private current: Instance | undefined;
  private parser: Promise<XGrammar> | undefined;
  private readonly cache: Lru<string, CompiledGrammar>;
  /**
   * Grammars that constraints() calls are making matchers from, with how many calls: one evicted
   * meanwhile (by a concurrent request's compile) is disposed when the last is done, not under it.
   */
  private readonly pinned = new Map<CompiledGrammar, number>();
  private readonly evictedWhilePinned = new Set<CompiledGrammar>();
  /** Compiles under way, by key: concurrent requests with one constraint share one compile. */
  private readonly compiling = new Map<string, Promise<CompileResult>>();

  private readonly budget: CompileBudget | undefined;

  constructor(vocab: GrammarVocabulary, options: GrammarBackendOptions = {}) {
    this.vocab = vocab;
    this.cache = new Lru(options.cacheSize ?? DEFAULT_GRAMMAR_CACHE, (g) => {
      if (this.pinned.has(g)) this.evictedWhilePinned.add(g);
      else g.dispose();
    });
    const timeout = options.compileTimeoutMs ?? 0;
    this.budget = timeout > 0 ? new CompileBudget(vocab, timeout) : undefined;
  }

  get cachedGrammars(): number {
    return this.cache.size;
  }

  private load(): Promise<Instance> {
    if (!this.instance) {
      const loading = loadInstance(this.vocab);
      this.instance = loading;
      loading.then(
        (inst) => {
          if (this.instance === loading) this.current = inst;
        },
        () => {
          if (this.instance === loading) this.instance = undefined;
        },
      );
    }
    return this.instance;
  }

  /**
   * Checks, parses and compiles a constraint (or returns the cached grammar); RequestError when
   * refused. The grammar may be evicted and disposed by a later compile: constraints() pins it.
   */
  async compile(c: StructuredConstraint): Promise<CompileResult> {
    const key = JSON.stringify(c);
    const hit = this.cache.get(key);
    if (hit) return { compiled: hit, compileMs: 0 };
    let pending = this.compiling.get(key);
    if (!pending) {
      pending = this.compileNew(c, key).finally(() => this.compiling.delete(key));
      this.compiling.set(key, pending);
    }
    return pending;
  }

  private async compileNew(c: StructuredConstraint, key: string): Promise<CompileResult> {
    checkSupported(c);
    await this.parse(c);
    // Compiled first where a slow compile stalls nothing (and refused if it overruns).
    await this.budget?.check(c, key);
    const loading = this.load();
    const inst = await loading;
    const t0 = performance.now();
    const r = await captureErrors(() => compileWith(inst, c));
    if (this.instance !== loading) {
      // Another compile aborted meanwhile and the instance was dropped: this grammar is its.
      r.value?.dispose();
      return this.compileNew(c, key);
    }
    if (r.error !== undefined || !r.value) {
      // The instance that aborted is not used again; cached grammars go with it.
      this.instance = undefined;
      this.current = undefined;
      this.cache.clear();
      throw refused(c, abortReason(r.messages, r.error));
    }
    const compileMs = performance.now() - t0;
    this.cache.set(key, r.value);
    return { compiled: r.value, compileMs };
  }

  /** One constraint per choice, each with its own matcher in the grammar's start state. */
  async constraints(c: StructuredConstraint, n: number): Promise<GrammarConstraint[]> {
    const key = JSON.stringify(c);
    let compiled: CompiledGrammar;
    let inst: Instance;
    for (;;) {
      compiled = (await this.compile(c)).compiled;
      // Another request's compile may have evicted (and so disposed) it, or dropped the instance
      // with every grammar, while this call waited: still cached, it is alive and the current
      // instance's, and it is pinned in this same turn.
      if (this.cache.get(key) === compiled && this.current) {
        inst = this.current;
        break;
      }
    }
    this.pin(compiled);
    try {
      const out: GrammarConstraint[] = [];
      for (let i = 0; i < n; i++)
        out.push(
          new GrammarConstraint(
            await inst.xg.GrammarMatcher.createGrammarMatcher(compiled, this.vocab.stopTokenIds),
          ),
        );
      return out;
    } finally {
      this.unpin(compiled);
    }
  }

  private pin(g: CompiledGrammar): void {
    this.pinned.set(g, (this.pinned.get(g) ?? 0) + 1);
  }

  private unpin(g: CompiledGrammar): void {
    const left = (this.pinned.get(g) ?? 1) - 1;
    if (left > 0) {
      this.pinned.set(g, left);
      return;
    }
    this.pinned.delete(g);
    if (this.evictedWhilePinned.delete(g)) g.dispose();
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
