/**
 * Fair share between callers: waiting requests are kept per share (an API key and project), and
 * among the share heads of the best priority the next admitted is the one whose share was admitted
 * least recently (never admitted first), ties by arrival. So one key with 64 requests waiting and
 * another with 1 alternate: the second key's request is admitted within one admission, not after
 * the 64. Within a share, order is the policy's (arrival, or priority then arrival).
 */
import type { Queued, SchedulingPolicy } from "./request-queue.ts";

export interface SharedQueued extends Queued {
  /** Whose share the request counts against; requests without one share one. */
  shareKey?: string;
}

export class FairShareQueue<T extends SharedQueued> {
  readonly policy: SchedulingPolicy;
  /** Each share's waiting requests in the policy's order. */
  private readonly shares = new Map<string, T[]>();
  /** When each share last had a request admitted (a running count of admissions). */
  private readonly lastAdmitted = new Map<string, number>();
  private admissions = 0;
  private count = 0;

  constructor(policy: SchedulingPolicy) {
    this.policy = policy;
  }

  get length(): number {
    return this.count;
  }

  /** Shares with requests waiting. */
  get waitingShares(): number {
    return this.shares.size;
  }

  private before(a: T, b: T): boolean {
    if (this.policy === "priority" && a.priority !== b.priority) return a.priority < b.priority;
    return a.arrival < b.arrival;
  }

  push(item: T): void {
    const key = item.shareKey ?? "";
    const list = this.shares.get(key) ?? [];
    this.shares.set(key, list);
    let i = list.length;
    while (i > 0 && this.before(item, list[i - 1]!)) i--;
    list.splice(i, 0, item);
    this.count++;
  }

  /** The next request to admit: best priority first, then the share admitted least recently. */
  peek(): T | undefined {
    let best: T | undefined;
    let bestServed = 0;
    for (const [key, list] of this.shares) {
      const head = list[0]!;
      const served = this.lastAdmitted.get(key) ?? -1;
      if (
        best === undefined ||
        (this.policy === "priority" && head.priority !== best.priority
          ? head.priority < best.priority
          : served !== bestServed
            ? served < bestServed
            : head.arrival < best.arrival)
      ) {
        best = head;
        bestServed = served;
      }
    }
    return best;
  }

  shift(): T | undefined {
    const next = this.peek();
    if (next === undefined) return undefined;
    const key = next.shareKey ?? "";
    this.lastAdmitted.set(key, this.admissions++);
    this.remove(next);
    return next;
  }

  remove(item: T): boolean {
    const key = item.shareKey ?? "";
    const list = this.shares.get(key);
    const i = list?.indexOf(item) ?? -1;
    if (!list || i < 0) return false;
    list.splice(i, 1);
    if (list.length === 0) this.shares.delete(key);
    this.count--;
    // Debt: shares are forgotten only once no one waits; a queue that never drains keeps one entry
    // per caller admitted since it last did.
    if (this.count === 0) this.lastAdmitted.clear();
    return true;
  }

  *[Symbol.iterator](): Iterator<T> {
    for (const list of this.shares.values()) yield* list;
  }
}
