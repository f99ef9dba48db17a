/**
 * Admission control for generation requests, decided on the main thread before any work: at most
 * `maxWaiting` requests waiting to start generating (beyond it a 503 with Retry-After), and per API
 * key at most `maxConcurrentPerKey` requests at once and `tokensPerMinutePerKey` prompt plus
 * completion tokens over the last minute (beyond them a 429 with Retry-After). A limit of 0 is off.
 */
import { overloaded, rateLimited } from "../errors.ts";

export interface AdmissionLimits {
  /** Requests admitted but not yet generating (template, queue, prefill). */
  maxWaiting: number;
  maxConcurrentPerKey: number;
  tokensPerMinutePerKey: number;
}

export const ADMISSION_DEFAULTS: AdmissionLimits = {
  maxWaiting: 1024,
  maxConcurrentPerKey: 0,
  tokensPerMinutePerKey: 0,
};

/** Why a request was refused, as /metrics labels it. */
export type RefusalReason = "waiting_full" | "key_concurrency" | "key_tokens";

const MINUTE_MS = 60_000;
/** Retry-After when capacity frees as requests finish, which cannot be foreseen. */
const RETRY_SOON_SECONDS = 1;

interface KeyState {
  running: number;
  /** Tokens of the key's finished requests, oldest first: [finished at (ms), tokens]. */
  spent: [number, number][];
  spentTotal: number;
}

/** One admitted request: it is waiting until `started()`, and holds its place until `release()`. */
export interface AdmissionTicket {
  started(): void;
  /** Frees the request's place and charges its tokens to its key (once; later calls do nothing). */
  release(tokens: number): void;
}

export class AdmissionControl {
  readonly limits: AdmissionLimits;
  private waitingCount = 0;
  private readonly keys = new Map<string, KeyState>();
  readonly refusals: Record<RefusalReason, number> = { waiting_full: 0, key_concurrency: 0, key_tokens: 0 };
  private readonly now: () => number;

  constructor(limits: Partial<AdmissionLimits> = {}, now: () => number = Date.now) {
    this.limits = { ...ADMISSION_DEFAULTS, ...limits };
    for (const [name, value] of Object.entries(this.limits))
      if (!Number.isSafeInteger(value) || value < 0)
        throw new RangeError(`admission limit ${name} must be a non-negative integer, got ${value}`);
    this.now = now;
  }

  get waiting(): number {
    return this.waitingCount;
  }

  /** Admits a request for `key` or throws the 503/429 that refuses it. */
  admit(key: string): AdmissionTicket {
    const { maxWaiting, maxConcurrentPerKey, tokensPerMinutePerKey } = this.limits;
    // A key over its own limits hears so (429) before the server's shared waiting limit (503) is
    // consulted, so a client learns which of the two it should wait for.
    const state = this.keys.get(key) ?? { running: 0, spent: [], spentTotal: 0 };
    if (maxConcurrentPerKey > 0 && state.running >= maxConcurrentPerKey) {
      this.refusals.key_concurrency++;
      throw rateLimited(
        "requests",
        `Rate limit reached for concurrent requests on this API key: limit ${maxConcurrentPerKey}, running ${state.running}.`,
        RETRY_SOON_SECONDS,
      );
    }
    if (tokensPerMinutePerKey > 0) {
      this.forgetOld(state);
      if (state.spentTotal >= tokensPerMinutePerKey) {
        this.refusals.key_tokens++;
        throw rateLimited(
          "tokens",
          `Rate limit reached for tokens per minute (TPM) on this API key: limit ${tokensPerMinutePerKey}, used ${state.spentTotal}.`,
          this.secondsUntilUnder(state, tokensPerMinutePerKey),
        );
      }
    }
    if (maxWaiting > 0 && this.waitingCount >= maxWaiting) {
      this.refusals.waiting_full++;
      throw overloaded(
        `The server has ${this.waitingCount} requests waiting (its limit); retry shortly.`,
        RETRY_SOON_SECONDS,
      );
    }
    this.keys.set(key, state);
    state.running++;
    this.waitingCount++;
    let waiting = true;
    let released = false;
    const stopWaiting = () => {
      if (waiting) this.waitingCount--;
      waiting = false;
    };
    return {
      started: stopWaiting,
      release: (tokens) => {
        if (released) return;
        released = true;
        stopWaiting();
        state.running--;
        if (tokensPerMinutePerKey > 0 && tokens > 0) {
          state.spent.push([this.now(), tokens]);
          state.spentTotal += tokens;
        }
        if (state.running === 0 && state.spent.length === 0) this.keys.delete(key);
      },
    };
  }

  private forgetOld(state: KeyState): void {
    const cutoff = this.now() - MINUTE_MS;
    while (state.spent.length > 0 && state.spent[0]![0] <= cutoff)
      state.spentTotal -= state.spent.shift()![1];
  }

  /** Seconds until enough of the last minute's tokens age out to bring the key under its limit. */
  private secondsUntilUnder(state: KeyState, limit: number): number {
    let total = state.spentTotal;
    for (const [at, tokens] of state.spent) {
      total -= tokens;
      if (total < limit) return Math.max(1, Math.ceil((at + MINUTE_MS - this.now()) / 1000));
    }
    return 60;
  }
}

/** The operator's limits on one request (0: off). */
export interface RequestLimits {
  maxPromptTokens: number;
  maxTotalTokens: number;
  /** A generation still running this long after it went to the engine (queue time included) ends with a 408 (or an SSE error). */
  requestTimeoutMs: number;
}

export const REQUEST_LIMIT_DEFAULTS: RequestLimits = {
  maxPromptTokens: 0,
  maxTotalTokens: 0,
  requestTimeoutMs: 600_000,
};
