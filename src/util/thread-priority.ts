/**
 * Scheduling priority per thread. On a machine whose every core steps the model, work done for a
 * request that is not running yet (parsing a large body, tokenizing, rendering a template) takes a
 * core from the forward pass, whose threads wait for the slowest of them: every running stream's
 * step is delayed by it. Threads doing such work lower their own priority, so the cores go to the
 * step first and preparation uses what is left. Linux keeps a nice value per thread.
 */
import { readlinkSync } from "node:fs";
import { getPriority, setPriority } from "node:os";

/** The nice value preparation threads run at (0 is normal, 19 the lowest priority). */
export const PREPARATION_NICE = 10;

/** The calling thread's id, from /proc/thread-self ("<pid>/task/<tid>"); undefined off Linux. */
function threadId(): number | undefined {
  if (process.platform !== "linux") return undefined;
  try {
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
    return Number.isSafeInteger(tid) ? tid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Lowers the calling thread's priority to at least `nice` (never raises it: an operator's own
 * `nice` stays in force). Returns the thread's nice value after, or undefined where threads have
 * none of their own (not Linux) or it could not be read.
 */
export function lowerThreadPriority(nice = PREPARATION_NICE): number | undefined {
  const tid = threadId();
  if (tid === undefined) return undefined;
  try {
    if (getPriority(tid) < nice) setPriority(tid, nice);
    return getPriority(tid);
  } catch {
    return undefined;
  }
}
