/**
 * One engine request's events with the bookkeeping every generation route shares: token counts
 * into the usage tally, time to first token, and the token counters once the request is answered.
 */
import type { EngineEvent } from "../core/types.ts";
import type { Engine, PreparedRequest } from "../engine/engine.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { ServingContext, UsageTally } from "./context.ts";

export class EngineRun {
  private readonly engine: Engine;
  private readonly metrics: Metrics;
  private readonly prepared: PreparedRequest;
  private readonly tally: UsageTally;
  private readonly signal: AbortSignal;

  constructor(deps: { engine: Engine; metrics: Metrics }, prepared: PreparedRequest, ctx: ServingContext) {
    this.engine = deps.engine;
    this.metrics = deps.metrics;
    this.prepared = prepared;
    this.tally = ctx.usage;
    this.signal = ctx.signal;
  }

  /** The engine's events, observed on the way through; nothing when the client already left. */
  async *events(): AsyncGenerator<EngineEvent> {
    // The pool aborts on the signal's event, which an already aborted signal never fires.
    if (this.signal.aborted) return;
    const t0 = performance.now();
    let firstToken = true;
    const tally = this.tally;
    for await (const e of this.engine.stream(this.prepared, this.signal)) {
      if (e.type === "prompt") {
        tally.promptTokens = e.promptTokenIds.length;
        tally.cachedTokens = e.cachedTokens;
      } else if (e.type === "delta" && firstToken) {
        firstToken = false;
        this.metrics.ttft.observe((performance.now() - t0) / 1000, { model: tally.model });
      } else if (e.type === "finish") tally.completionTokens += e.completionTokens;
      yield e;
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
