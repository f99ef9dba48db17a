/**
 * Waiting requests, in admission order. `fcfs`: arrival order. `priority`: lower `priority` value
 * first, ties by arrival (vLLM's priority scheduling).
 */

export type SchedulingPolicy = "fcfs" | "priority";

export interface Queued {
  priority: number;
  /** Monotonic arrival number. */
  arrival: number;
}

export class RequestQueue<T extends Queued> {
  readonly policy: SchedulingPolicy;
  private readonly items: T[] = [];

  constructor(policy: SchedulingPolicy) {
    this.policy = policy;
  }

  get length(): number {
    return this.items.length;
  }

  private before(a: T, b: T): boolean {
    if (this.policy === "priority" && a.priority !== b.priority) return a.priority < b.priority;
    return a.arrival < b.arrival;
  }

  /** Inserts keeping the order (queues are short: a linear scan from the back is enough). */
  push(item: T): void {
    let i = this.items.length;
    while (i > 0 && this.before(item, this.items[i - 1]!)) i--;
    this.items.splice(i, 0, item);
  }

  peek(): T | undefined {
    return this.items[0];
  }

  shift(): T | undefined {
    return this.items.shift();
  }

  remove(item: T): boolean {
    const i = this.items.indexOf(item);
    if (i < 0) return false;
    this.items.splice(i, 1);
    return true;
  }

  [Symbol.iterator](): Iterator<T> {
    return this.items[Symbol.iterator]();
  }
}
