/**
 * How much CPU other processes used while a run was timed. The dev box has 2
 * vCPUs shared with other work, and a single busy neighbour halves a 2-thread
 * run, so runs are checked and retried rather than trusted blindly.
 *
 * Machine busy time comes from /proc/stat, our own from process.cpuUsage()
 * (which covers every thread of the process, ORT's and llama.cpp's included).
 */
import { readFileSync } from "node:fs";
import { nowSeconds } from "./stats.ts";

/** Linux reports /proc/stat in USER_HZ ticks, 100 per second on every mainstream build. */
const TICKS_PER_SECOND = 100;

function machineBusySeconds(): number | undefined {
  try {
    const fields = readFileSync("/proc/stat", "utf8")
      .split("\n", 1)[0]
      .trim()
      .split(/\s+/)
      .slice(1, 9)
      .map(Number);
    // user nice system idle iowait irq softirq steal: everything but idle and iowait is busy.
    const [user, nice, system, , , irq, softirq, steal] = fields;
    return (user + nice + system + irq + softirq + steal) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** Starts a probe; calling the result gives the average number of CPUs used by others since. */
export function startContentionProbe(): () => number | undefined {
  const busy0 = machineBusySeconds();
  const own0 = process.cpuUsage();
  const t0 = nowSeconds();
  return () => {
    const busy1 = machineBusySeconds();
    if (busy0 === undefined || busy1 === undefined) return undefined;
    const own = process.cpuUsage(own0);
    const foreign = busy1 - busy0 - (own.user + own.system) / 1e6;
    return Math.max(0, foreign) / (nowSeconds() - t0);
  };
}

export interface Attempted<T> {
  value: T;
  /** Average CPUs used by other processes during the kept attempt (undefined off Linux). */
  foreignCpus?: number;
  attempts: number;
}

/**
 * Runs `fn` until an attempt sees less than `maxForeignCpus` of outside load,
 * at most `maxAttempts` times, pausing between attempts so bursts can pass;
 * keeps the least disturbed attempt.
 */
export async function runUndisturbed<T>(
  fn: () => Promise<T>,
  maxForeignCpus: number,
  maxAttempts: number,
  pauseMs = 2000,
): Promise<Attempted<T>> {
  let best: Attempted<T> | undefined;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const probe = startContentionProbe();
    const value = await fn();
    const foreignCpus = probe();
    if (!best || (foreignCpus ?? 0) < (best.foreignCpus ?? 0))
      best = { value, foreignCpus, attempts: attempt };
    best.attempts = attempt;
    if (foreignCpus === undefined || foreignCpus < maxForeignCpus) break;
    await new Promise((r) => setTimeout(r, pauseMs));
  }
  return best!;
}
