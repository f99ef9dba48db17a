/**
 * The engine requests of one API request (one per prompt) with the bookkeeping every generation
 * route shares: their events merged in arrival order and tagged with their prompt, token counts
 * into the usage tally, time to first token, and the token counters once the request is answered.
 */
import type { EngineEvent } from "../core/types.ts";
import type { Engine, PreparedRequest } from "../engine/engine.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { ServingContext, UsageTally } from "./context.ts";

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

  constructor(deps: { engine: Engine; metrics: Metrics }, prepared: PreparedRequest[], ctx: ServingContext) {
    this.engine = deps.engine;
    this.metrics = deps.metrics;
    this.prepared = prepared;
    this.tally = ctx.usage;
    this.signal = ctx.signal;
  }

  /** Every request's events, observed on the way through; nothing when the client already left. */
  async *events(): AsyncGenerator<PromptEventOf> {
    // The pool aborts on the signal's event, which an already aborted signal never fires.
    if (this.signal.aborted) return;
    // The client leaving, or the consumer stopping early (a failed prompt), ends every request.
    const stop = new AbortController();
    const onClientGone = () => stop.abort();
    this.signal.addEventListener("abort", onClientGone, { once: true });
    const t0 = performance.now();
    let firstToken = true;
    const tally = this.tally;
    try {
      const streams = this.prepared.map((p) => this.engine.stream(p, stop.signal));
      for await (const tagged of merge(streams, stop)) {
        const e = tagged.event;
        if (e.type === "prompt") {
          tally.promptTokens += e.promptTokenIds.length;
          tally.cachedTokens += e.cachedTokens;
        } else if (e.type === "delta" && firstToken) {
          firstToken = false;
          this.metrics.ttft.observe((performance.now() - t0) / 1000, { model: tally.model });
        } else if (e.type === "finish") tally.completionTokens += e.completionTokens;
        yield tagged;
      }
    } finally {
      this.signal.removeEventListener("abort", onClientGone);
      stop.abort();
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
