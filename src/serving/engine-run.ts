/**
 * One engine request's events with the bookkeeping every generation route shares: token counts
 * into the usage tally, time to first token, the token counters once the request is answered,
 * its admission ticket (waiting until its prompt is processed, released at the end) and its
 * deadline (the engine request is aborted and the run ends with a 408).
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

export class EngineRun {
  private readonly engine: Engine;
  private readonly metrics: Metrics;
  private readonly prepared: PreparedRequest;
  private readonly tally: UsageTally;
  private readonly signal: AbortSignal;
  private readonly control: RunControl;

  constructor(
    deps: { engine: Engine; metrics: Metrics },
    prepared: PreparedRequest,
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
   * The engine's events, observed on the way through; nothing when the client already left.
   * Throws a 408 ApiError when the deadline passed first.
   */
  async *events(): AsyncGenerator<EngineEvent> {
    const tally = this.tally;
    const { ticket, timeoutMs } = this.control;
    const deadline = timeoutMs > 0 ? AbortSignal.timeout(timeoutMs) : undefined;
    try {
      // The pool aborts on the signal's event, which an already aborted signal never fires.
      if (this.signal.aborted) return;
      const signal = deadline ? AbortSignal.any([this.signal, deadline]) : this.signal;
      const t0 = performance.now();
      let firstToken = true;
      for await (const e of this.engine.stream(this.prepared, signal)) {
        if (e.type === "prompt") {
          tally.promptTokens = e.promptTokenIds.length;
          tally.cachedTokens = e.cachedTokens;
          ticket.started();
        } else if (e.type === "delta" && firstToken) {
          firstToken = false;
          this.metrics.ttft.observe((performance.now() - t0) / 1000, { model: tally.model });
        } else if (e.type === "finish") tally.completionTokens += e.completionTokens;
        yield e;
      }
      if (deadline?.aborted && !this.signal.aborted) {
        this.metrics.requestTimeouts.inc();
        throw requestTimeout(timeoutMs / 1000);
      }
    } finally {
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
