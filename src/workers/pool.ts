/**
 * The main thread's side of the engine: worker threads that each own some of the models, and, per
 * request, an async stream of EngineEvents. Aborting the signal cancels the request in its worker
 * at the next step. A worker that dies fails only the requests it was running; piscina starts a new
 * thread in its slot, which loads that slot's models again on their next request.
 */
import { MessageChannel } from "node:worker_threads";
import { Piscina } from "piscina";
import type { EngineCoreConfig, EngineEvent, EngineRequest } from "../core/types.ts";
import { type ThreadHeap, threadHeap } from "../util/thread-heap.ts";
import { loadedFrom } from "./engine-key.ts";
import type { WorkerTask } from "./worker.ts";

export interface EnginePoolOptions {
  /** Worker threads; each model is served by exactly one of them. */
  workers: number;
  /** Requests in flight per worker; the engine's own queue orders them. */
  maxRequestsPerWorker: number;
}

/** One worker slot: a single-thread piscina pool, so a task sent to it runs on that thread. */
interface WorkerSlot {
  pool: Piscina;
  /** How many models are assigned to this slot. */
  models: number;
}

/** The worker module next to this one: TypeScript from the sources, JavaScript from the build (dist/). */
const WORKER_FILE = import.meta.url.endsWith(".ts") ? "./worker.ts" : "./worker.js";

export class EnginePool {
  private readonly slots: WorkerSlot[];
  /** Model key (JSON of its EngineCoreConfig) → index of the slot that owns it. */
  private readonly owners = new Map<string, number>();

  constructor(opts: EnginePoolOptions) {
    if (!Number.isInteger(opts.workers) || opts.workers < 1)
      throw new RangeError(`workers must be a positive integer, got ${opts.workers}`);
    this.slots = Array.from({ length: opts.workers }, () => ({
      pool: new Piscina({
        filename: new URL(WORKER_FILE, import.meta.url).href,
        minThreads: 1,
        maxThreads: 1,
        concurrentTasksPerWorker: opts.maxRequestsPerWorker,
        // Requests beyond the per-worker limit wait here rather than fail.
        maxQueue: Number.POSITIVE_INFINITY,
        idleTimeout: Number.POSITIVE_INFINITY,
        // A worker's engine keeps stepping between tasks (e.g. dropping an aborted request's row);
        // piscina's default Atomics.wait would freeze its event loop whenever no task is open.
        atomics: "disabled",
      }),
      models: 0,
    }));
  }

  /**
   * The slot serving a model, chosen on its first request and fixed from then on. A model's
   * batches and prefix cache live in one EngineCore, so spreading its requests over workers would
   * split batches, miss cached prefixes and load the model once per worker. A new model goes to the
   * worker owning the fewest models (ties to the lowest index): model sizes and traffic are not
   * known up front, and the count keeps memory and work spread without them. The price: one busy
   * model uses one worker, and workers beyond the number of models stay idle.
   */
  private slotFor(config: EngineCoreConfig): WorkerSlot {
    const key = JSON.stringify(config);
    let index = this.owners.get(key);
    if (index === undefined) {
      index = 0;
      for (let i = 1; i < this.slots.length; i++)
        if (this.slots[i]!.models < this.slots[index]!.models) index = i;
      this.owners.set(key, index);
      this.slots[index]!.models++;
    }
    return this.slots[index]!;
  }

  /** Index of the worker that owns a model, or undefined before its first request. */
  workerOf(config: EngineCoreConfig): number | undefined {
    return this.owners.get(JSON.stringify(config));
  }

  /** Streams a request's events; always ends with a `done` or an `error` event. */
  async *generate(
    config: EngineCoreConfig,
    request: EngineRequest,
    signal?: AbortSignal,
  ): AsyncGenerator<EngineEvent> {
    const { port1, port2 } = new MessageChannel();
    const pending: EngineEvent[] = [];
    let wake: (() => void) | undefined;
    let ended = false;
    const push = (e: EngineEvent) => {
      if (ended) return;
      pending.push(e);
      if (e.type === "done" || e.type === "error") ended = true;
      wake?.();
    };
    port1.on("message", push);
    const task: WorkerTask = { kind: "generate", config, request, port: port2 };
    const onAbort = () => {
      port1.postMessage({ type: "abort" });
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    // The worker closes its port after its last event; messages sent before a close arrive before
    // the 'close' event, so once the task resolved and the port closed, nothing more can come.
    const portClosed = new Promise<void>((r) => port1.once("close", () => r()));
    const { pool } = this.slotFor(config);
    pool.run(task, { transferList: [port2] }).then(
      async () => {
        await portClosed;
        if (signal?.aborted) {
          // Aborted by the caller: the stream just ends.
          ended = true;
          wake?.();
        } else push({ type: "error", code: "engine_failure", message: "request ended without a result" });
      },
      (err: Error) =>
        push({ type: "error", code: "engine_failure", message: `engine worker failed: ${err.message}` }),
    );
    try {
      while (true) {
        if (pending.length === 0) {
          if (ended) return;
          await new Promise<void>((r) => {
            wake = r;
          });
          wake = undefined;
          continue;
        }
        const e = pending.shift()!;
        yield e;
        if (e.type === "done" || e.type === "error") return;
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
      if (!ended) port1.postMessage({ type: "abort" });
      port1.close();
    }
  }

  /**
   * Per-engine statistics merged over every worker, keyed by the JSON of the engine's config; each
   * entry also names the worker holding it (`worker`). A worker that dies while answering has lost
   * its engines with its thread, so it contributes none.
   */
  async stats(): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    (await this.workerStats()).forEach((engines, worker) => {
      for (const [key, s] of Object.entries(engines)) out[key] = { ...(s as object), worker };
    });
    return out;
  }

  /** Per-engine statistics of each worker, by worker index (the engines loaded in that thread). */
  async workerStats(): Promise<Record<string, unknown>[]> {
    const answers = await Promise.allSettled(
      this.slots.map(
        (s) => s.pool.run({ kind: "stats" } satisfies WorkerTask) as Promise<Record<string, unknown>>,
      ),
    );
    return answers.map((a) => (a.status === "fulfilled" ? a.value : {}));
  }

  /**
   * Closes the engines loaded from `modelDir` (of that revision only, when given) in whichever
   * workers hold them (their sessions and caches are freed); a later request would load the model
   * again. Returns how many were closed.
   */
  async unload(modelDir: string, revision?: string): Promise<number> {
    let closed = 0;
    for (const [key, index] of [...this.owners]) {
      if (!loadedFrom(JSON.parse(key) as EngineCoreConfig, modelDir, revision)) continue;
      this.owners.delete(key);
      const slot = this.slots[index]!;
      slot.models--;
      closed += (await slot.pool.run({ kind: "unload", modelDir, revision } satisfies WorkerTask)) as number;
    }
    return closed;
  }

  /** Test hook: makes one worker die (worker 0 unless told which). */
  crashOneWorker(worker = 0): Promise<unknown> {
    const slot = this.slots[worker];
    if (!slot) return Promise.reject(new RangeError(`no worker ${worker}`));
    return slot.pool.run({ kind: "crash" } satisfies WorkerTask);
  }

  /**
   * Each engine worker's V8 heap, by worker index: bytes in use and committed. A worker that is
   * gone or does not answer reports zeros.
   */
  heapStatistics(): Promise<ThreadHeap[]> {
    return Promise.all(this.slots.map((s) => threadHeap(s.pool.threads[0])));
  }

  get threads(): number {
    return this.slots.reduce((n, s) => n + s.pool.threads.length, 0);
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.pool.destroy()));
  }
}
