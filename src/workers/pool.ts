/**
 * The main thread's side of the engine: a piscina pool of worker threads and, per request, an
 * async stream of EngineEvents. Aborting the signal cancels the request in its worker at the next
 * step. A worker that dies fails only the requests it was running; piscina starts a new one for
 * later tasks.
 */
import { MessageChannel } from "node:worker_threads";
import { Piscina } from "piscina";
import type { EngineCoreConfig, EngineEvent, EngineRequest } from "../core/types.ts";
import type { WorkerTask } from "./worker.ts";

export interface EnginePoolOptions {
  /** Worker threads (each holds its own copy of every model it serves). */
  workers: number;
  /** Requests in flight per worker; the engine's own queue orders them. */
  maxRequestsPerWorker: number;
}

export class EnginePool {
  private readonly pool: Piscina;

  constructor(opts: EnginePoolOptions) {
    this.pool = new Piscina({
      filename: new URL("./worker.ts", import.meta.url).href,
      minThreads: opts.workers,
      maxThreads: opts.workers,
      concurrentTasksPerWorker: opts.maxRequestsPerWorker,
      // Requests beyond the per-worker limit wait here rather than fail.
      maxQueue: Number.POSITIVE_INFINITY,
      idleTimeout: Number.POSITIVE_INFINITY,
      // A worker's engine keeps stepping between tasks (e.g. dropping an aborted request's row);
      // piscina's default Atomics.wait would freeze its event loop whenever no task is open.
      atomics: "disabled",
    });
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
    this.pool.run(task, { transferList: [port2] }).then(
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

  /** Per-engine statistics from one worker (queue depth, running sequences, KV use). */
  stats(): Promise<Record<string, unknown>> {
    return this.pool.run({ kind: "stats" } satisfies WorkerTask);
  }

  /** Test hook: makes one worker die. */
  crashOneWorker(): Promise<unknown> {
    return this.pool.run({ kind: "crash" } satisfies WorkerTask);
  }

  get threads(): number {
    return this.pool.threads.length;
  }

  close(): Promise<void> {
    return this.pool.destroy();
  }
}
