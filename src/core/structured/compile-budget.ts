/**
 * The grammar compile budget. XGrammar compiles a constraint in one synchronous call, and the
 * engine's compile runs on the worker thread that steps the model: a schema that takes a minute
 * to compile would stall every stream of that model for a minute. So a constraint not yet compiled
 * is first compiled by a thread of its own with a time budget; one that overruns has that thread
 * ended and is refused with a 400 naming the budget (and refused at once if sent again). Only a
 * constraint that compiled within the budget is compiled by the engine, so the engine's thread
 * waits at most about the budget. The price: a new constraint compiles twice (13.5 ms median on
 * the JSONSchemaBench sample).
 */
import { Piscina } from "piscina";
import { BUDGETED_POOL_OPTIONS, BudgetExceeded, runBudgeted } from "../../util/budgeted-task.ts";
import type { RequestError } from "../request-error.ts";
import { refused } from "./check-constraint.ts";
import type { CompileOutcome, CompileTask } from "./compile-budget-worker.ts";
import type { StructuredConstraint } from "./constraint-spec.ts";
import { Lru } from "./lru.ts";
import type { GrammarVocabulary } from "./vocabulary.ts";

/** The worker module next to this one: TypeScript from the sources, JavaScript from the build (dist/). */
const WORKER_FILE = import.meta.url.endsWith(".ts")
  ? "./compile-budget-worker.ts"
  : "./compile-budget-worker.js";

/** Constraints refused for their compile time, remembered so a retry costs nothing. */
const REFUSED_CACHE = 256;

export class CompileBudget {
  readonly timeoutMs: number;
  private readonly vocab: GrammarVocabulary;
  private pool: Piscina | undefined;
  private readonly overran = new Lru<string, true>(REFUSED_CACHE);

  constructor(vocab: GrammarVocabulary, timeoutMs: number) {
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1)
      throw new RangeError(`the grammar compile budget must be a positive integer of ms, got ${timeoutMs}`);
    this.vocab = vocab;
    this.timeoutMs = timeoutMs;
  }

  /** The thread is started on the first constraint: most engines never see one. */
  private threads(): Piscina {
    if (this.pool) return this.pool;
    this.pool = new Piscina({
      filename: new URL(WORKER_FILE, import.meta.url).href,
      workerData: this.vocab,
      minThreads: 1,
      maxThreads: 1,
      idleTimeout: Number.POSITIVE_INFINITY,
      maxQueue: Number.POSITIVE_INFINITY,
      ...BUDGETED_POOL_OPTIONS,
    });
    // A thread ended by the budget takes its task with it, and that task's caller is told. One
    // listener for the pool's life: added per check, they piled up (one per structured request).
    this.pool.on("error", () => {});
    return this.pool;
  }

  /**
   * Resolves once the constraint compiled within the budget (it may then be compiled where it is
   * used); rejects with a RequestError naming the constraint's field when it overran the budget or
   * XGrammar refused it.
   */
  async check(c: StructuredConstraint, key: string): Promise<void> {
    if (this.overran.get(key)) throw this.overrun(c);
    let outcome: CompileOutcome;
    try {
      outcome = await runBudgeted<CompileOutcome>(
        this.threads(),
        (port): CompileTask => ({ constraint: c, port }),
        this.timeoutMs,
      );
    } catch (err) {
      if (!(err instanceof BudgetExceeded)) throw err;
      this.overran.set(key, true);
      throw this.overrun(c);
    }
    if ("error" in outcome) throw refused(c, outcome.error);
  }

  private overrun(c: StructuredConstraint): RequestError {
    return refused(
      c,
      `compiling this constraint took longer than ${this.timeoutMs} ms (the server's grammar compile budget, --grammar-compile-timeout-ms)`,
    );
  }

  async close(): Promise<void> {
    await this.pool?.destroy();
    this.pool = undefined;
  }
}
