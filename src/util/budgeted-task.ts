/**
 * A piscina task with a time budget that counts from when a thread starts it (its "started"
 * message on the task's port), not from when it was queued. A task that overruns has its thread
 * ended (piscina replaces it) and rejects with BudgetExceeded; any other failure (a thread out of
 * memory, a crash) rejects as it came.
 */
import { MessageChannel, type MessagePort } from "node:worker_threads";
import type { Piscina } from "piscina";

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
