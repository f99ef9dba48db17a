/**
 * The engine requests of one API request (one per prompt) with the bookkeeping every generation
 * route shares: their events merged in arrival order and tagged with their prompt, token counts
 * into the usage tally, time to first token, the token counters once the request is answered,
 * its admission ticket (waiting until every prompt is processed, released at the end) and its
 * deadline (the engine requests are aborted and the run ends with a 408).
 */
import type { EngineEvent } from "../core/types.ts";
import type { Engine, PreparedRequest } from "../engine/engine.ts";
import { requestTimeout } from "../errors.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { AdmissionTicket } from "./admission.ts";
import type { ServingContext, UsageTally } from "./context.ts";

export interface RunControl {
  ticket: AdmissionTicket;
  /** Milliseconds from now the run may take (0: no limit). */
  timeoutMs: number;
}

/** An engine event and the index of the prompt (engine request) it belongs to. */
export interface PromptEventOf {
  prompt: number;
  event: EngineEvent;
}

export class EngineRun {
  private readonly engine: Engine;
  private readonly metrics: Metrics;
  private readonly prepared: PreparedRequest[];
  private readonly tally: UsageTally;
  private readonly signal: AbortSignal;
  private readonly control: RunControl;

  constructor(
    deps: { engine: Engine; metrics: Metrics },
    prepared: PreparedRequest[],
    ctx: ServingContext,
    control: RunControl,
  ) {
    this.engine = deps.engine;
    this.metrics = deps.metrics;
    this.prepared = prepared;
    this.tally = ctx.usage;
    this.signal = ctx.signal;
    this.control = control;
  }

  /**
   * Every request's events, observed on the way through; nothing when the client already left.
   * Throws a 408 ApiError when the deadline passed first.
   */
  async *events(): AsyncGenerator<PromptEventOf> {
    const tally = this.tally;
    const { ticket, timeoutMs } = this.control;
    // The client leaving, the deadline, or the consumer stopping early (a failed prompt) ends
    // every request.
    const stop = new AbortController();
    const onClientGone = () => stop.abort();
    const deadline = timeoutMs > 0 ? setTimeout(() => stop.abort(), timeoutMs) : undefined;
    let timedOut = false;
    if (deadline)
      stop.signal.addEventListener("abort", () => (timedOut = !this.signal.aborted), { once: true });
    this.signal.addEventListener("abort", onClientGone, { once: true });
    try {
      // The pool aborts on the signal's event, which an already aborted signal never fires.
      if (this.signal.aborted) return;
      const t0 = performance.now();
      let firstToken = true;
      let promptsDone = 0;
      const streams = this.prepared.map((p) => this.engine.stream(p, stop.signal));
      for await (const tagged of merge(streams, stop)) {
        const e = tagged.event;
        if (e.type === "prompt") {
          tally.promptTokens += e.promptTokenIds.length;
          tally.cachedTokens += e.cachedTokens;
          this.metrics.queueTime.observe(e.queueMs / 1000, { model: tally.model });
          if (++promptsDone === this.prepared.length) ticket.started();
        } else if (e.type === "delta" && firstToken) {
          firstToken = false;
          this.metrics.ttft.observe((performance.now() - t0) / 1000, { model: tally.model });
        } else if (e.type === "finish") tally.completionTokens += e.completionTokens;
        yield tagged;
      }
      if (timedOut) {
        this.metrics.requestTimeouts.inc();
        throw requestTimeout(timeoutMs / 1000);
      }
    } finally {
      clearTimeout(deadline);
      this.signal.removeEventListener("abort", onClientGone);
      stop.abort();
      ticket.release(tally.promptTokens + tally.completionTokens);
    }
  }

  /** Adds the request's tokens to the counters (once it was answered). */
  countTokens(): void {
    const { metrics: m, tally } = this;
    m.promptTokens.inc({ model: tally.model }, tally.promptTokens);
    m.completionTokens.inc({ model: tally.model }, tally.completionTokens);
    m.cachedTokens.inc({ model: tally.model }, tally.cachedTokens);
  }
}

/**
 * The streams' items as they arrive, each tagged with its stream's index. Stopped early, it
 * aborts the streams still running (through `stop`) and waits for each to end.
 */
async function* merge(
  streams: AsyncGenerator<EngineEvent>[],
  stop: AbortController,
): AsyncGenerator<PromptEventOf> {
  const next = (i: number) => streams[i]!.next().then((r) => ({ i, r }));
  const pending = new Map(streams.map((_, i) => [i, next(i)]));
  try {
    while (pending.size > 0) {
      const { i, r } = await Promise.race(pending.values());
      if (r.done) {
        pending.delete(i);
        continue;
      }
      pending.set(i, next(i));
      yield { prompt: i, event: r.value };
    }
  } finally {
    if (pending.size > 0) {
      stop.abort();
      await Promise.allSettled([...pending.values()]);
      await Promise.allSettled(streams.map((s) => s.return(undefined)));
    }
  }
}
