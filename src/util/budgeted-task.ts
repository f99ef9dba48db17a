/**
 * A piscina task with a time budget that counts from when a thread starts it (its "started"
 * message on the task's port), not from when it was queued. A task that overruns has its thread
 * ended (piscina replaces it) and rejects with BudgetExceeded; any other failure (a thread out of
 * memory, a crash) rejects as it came.
 */
import { MessageChannel, type MessagePort } from "node:worker_threads";
import type { Piscina } from "piscina";

/**
 * Options every pool that runs budgeted tasks takes. Each task transfers a MessagePort to its
 * thread, and a thread that receives it while blocked in piscina's synchronous Atomics.wait (its
 * default) keeps ~1.4 KB per task for good (piscina 5.3, Node 24: 80,000 tasks grew a thread's heap
 * from 8 to 115 MB; with the wait off, or asynchronous, it stayed at 8): over a server's life the
 * render threads' heaps grew without end. With the wait off, tasks reach the thread as messages.
 */
export const BUDGETED_POOL_OPTIONS = { atomics: "disabled" } as const;

export class BudgetExceeded extends Error {
  constructor(timeoutMs: number) {
    super(`the task ran past its budget of ${timeoutMs} ms`);
  }
}

/** Runs `task(port)` on the pool; the worker posts "started" on `port` when the budget begins. */
export async function runBudgeted<T>(
  pool: Piscina,
  task: (port: MessagePort) => object,
  timeoutMs: number,
): Promise<T> {
  const { port1, port2 } = new MessageChannel();
  const budget = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  let settled = false;
  port1.once("message", () => {
    if (settled) return;
    timer = setTimeout(() => {
      timedOut = true;
      budget.abort();
    }, timeoutMs);
  });
  try {
    return (await pool.run(task(port2), { transferList: [port2], signal: budget.signal })) as T;
  } catch (err) {
    throw timedOut ? new BudgetExceeded(timeoutMs) : err;
  } finally {
    settled = true;
    clearTimeout(timer);
    port1.close();
  }
}
