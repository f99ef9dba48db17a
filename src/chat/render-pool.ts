/**
 * Chat template rendering off the main thread: a small pool of worker threads (piscina) runs
 * `renderChat`, each render with a time budget (from the moment a thread takes it) and an output
 * budget (characters, plus a heap limit per thread so a template cannot grow memory without end).
 * A render that overruns has its thread terminated and replaced, and fails with a 400 that names
 * the budget. The main thread never runs a template, so no request can stall the event loop.
 */
import { Piscina } from "piscina";
import { ApiError, internalError, invalidRequest } from "../errors.ts";
import { BUDGETED_POOL_OPTIONS, BudgetExceeded, runBudgeted } from "../util/budgeted-task.ts";
import { type ThreadHeap, threadHeap } from "../util/thread-heap.ts";
import type { RenderChatOptions, RenderedChat } from "./render.ts";
import type { RenderOutcome, RenderTask } from "./render-worker.ts";
import type { ChatTemplateSource } from "./source.ts";

export interface TemplatePoolOptions {
  /** Worker threads rendering templates. */
  workers: number;
  /** Milliseconds one render may run. */
  timeoutMs: number;
  /** Characters one render may produce. */
  maxOutputChars: number;
}

export const TEMPLATE_POOL_DEFAULTS: TemplatePoolOptions = {
  workers: 2,
  timeoutMs: 5000,
  maxOutputChars: 16 << 20,
};

/** The worker module next to this one: TypeScript from the sources, JavaScript from the build (dist/). */
const RENDER_WORKER = import.meta.url.endsWith(".ts") ? "./render-worker.ts" : "./render-worker.js";

/** Heap per render thread: room for the output budget's strings and the copies concatenation makes. */
function heapLimitMb(maxOutputChars: number): number {
  return Math.max(256, Math.ceil((maxOutputChars * 2 * 8) / (1 << 20)));
}

/** Counts since start: renders a thread finished (text or a template error), and overruns. */
export interface TemplatePoolCounts {
  rendered: number;
  timedOut: number;
  outOfMemory: number;
}

export class TemplatePool {
  readonly options: TemplatePoolOptions;
  readonly counts: TemplatePoolCounts = { rendered: 0, timedOut: 0, outOfMemory: 0 };
  private readonly pool: Piscina;
  private readonly heapMb: number;

  constructor(options: Partial<TemplatePoolOptions> = {}) {
    this.options = { ...TEMPLATE_POOL_DEFAULTS, ...options };
    const { workers, timeoutMs, maxOutputChars } = this.options;
    for (const [name, value] of Object.entries({ workers, timeoutMs, maxOutputChars }))
      if (!Number.isSafeInteger(value) || value < 1)
        throw new RangeError(`template pool ${name} must be a positive integer, got ${value}`);
    this.heapMb = heapLimitMb(maxOutputChars);
    this.pool = new Piscina({
      filename: new URL(RENDER_WORKER, import.meta.url).href,
      minThreads: workers,
      maxThreads: workers,
      idleTimeout: Number.POSITIVE_INFINITY,
      maxQueue: Number.POSITIVE_INFINITY,
      resourceLimits: { maxOldGenerationSizeMb: this.heapMb },
      ...BUDGETED_POOL_OPTIONS,
    });
    // A thread that dies takes its render with it, and that render's caller is told (overrun());
    // the pool's own report of the same death has nobody else to tell.
    this.pool.on("error", () => {});
  }

  /**
   * Each render thread's V8 heap (in use, committed), for /metrics: every thread is its own
   * isolate. A thread that is gone or does not answer reports zeros.
   */
  heapStatistics(): Promise<ThreadHeap[]> {
    return Promise.all(this.pool.threads.map(threadHeap));
  }

  /** Renders a chat as `renderChat` does; template failures and overruns are 400 ApiErrors. */
  async render(source: ChatTemplateSource, options: RenderChatOptions): Promise<RenderedChat> {
    let outcome: RenderOutcome;
    try {
      outcome = await runBudgeted<RenderOutcome>(
        this.pool,
        (port): RenderTask => ({ source, options, maxOutputChars: this.options.maxOutputChars, port }),
        this.options.timeoutMs,
      );
    } catch (err) {
      throw this.overrun(err, err instanceof BudgetExceeded);
    }
    this.counts.rendered++;
    if ("text" in outcome) return { text: outcome.text };
    const e = outcome.error;
    throw new ApiError(e.status, e.type, e.message, e.param, e.code);
  }

  /** Why a render's thread was lost: its time budget, its memory, or something unexpected. */
  private overrun(err: unknown, timedOut: boolean): ApiError {
    if (timedOut) {
      this.counts.timedOut++;
      return invalidRequest(
        `The chat template did not finish rendering within ${this.options.timeoutMs} ms (the server's template time budget).`,
        "chat_template",
        "template_timeout",
      );
    }
    if ((err as { code?: unknown }).code === "ERR_WORKER_OUT_OF_MEMORY") {
      this.counts.outOfMemory++;
      return invalidRequest(
        `The chat template needed more memory than the server's template budget allows (${this.heapMb} MB).`,
        "chat_template",
        "template_memory_exceeded",
      );
    }
    return internalError(`chat template rendering failed: ${(err as Error).message}`);
  }

  /** Threads alive now (a thread that overran is replaced). */
  get threads(): number {
    return this.pool.threads.length;
  }

  close(): Promise<void> {
    return this.pool.destroy();
  }
}
