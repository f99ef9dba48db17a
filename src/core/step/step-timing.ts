/** Counters of the engine's steps: where decode time goes, jump-forward tokens, mixed passes. */
import type { StepOutput } from "../runner/batch-runner.ts";
import type { StepPlan } from "./plan.ts";

export interface StepCounters {
  /** Cumulative time in decode forward passes vs. in sampling + output processing of their rows. */
  decodeForwardMs: number;
  decodeSampleMs: number;
  decodeSteps: number;
  decodedTokens: number;
  /** Output tokens that joined by jump-forward (computed without a step of their own). */
  jumpForwardTokens: number;
  /** Steps whose decode rows and prompt chunk went through one forward pass. */
  mixedSteps: number;
  /** Steps that prefilled several prompts (admitted together, or one completing as the next starts). */
  promptBatchSteps: number;
  /**
   * Steps begun: each one forward pass; more where the runner takes no ragged tokens (a prompt chunk
   * and each row's jump-forward tokens then take passes of their own) or the chunk needs every
   * position's logits.
   */
  steps: number;
}

/** One step's clock: begun before the pass, `executed` when its logits are in, ended after update. */
export interface StepClock {
  executed(out: Promise<StepOutput>): Promise<StepOutput>;
  end(): void;
}

export class StepTiming {
  readonly counters: StepCounters = {
    decodeForwardMs: 0,
    decodeSampleMs: 0,
    decodeSteps: 0,
    decodedTokens: 0,
    jumpForwardTokens: 0,
    mixedSteps: 0,
    promptBatchSteps: 0,
    steps: 0,
  };

  begin(plan: StepPlan): StepClock {
    const c = this.counters;
    c.steps++;
    const decoding = plan.runs.filter((r) => !r.prompt);
    if (plan.runs.length - decoding.length > 1) c.promptBatchSteps++;
    const t0 = performance.now();
    let t1 = t0;
    return {
      executed: async (out) => {
        const done = await out;
        t1 = performance.now();
        if (done.mixed) c.mixedSteps++;
        return done;
      },
      end: () => {
        if (decoding.length === 0) return;
        c.decodeForwardMs += t1 - t0;
        c.decodeSampleMs += performance.now() - t1;
        c.decodeSteps += 1;
        c.decodedTokens += decoding.length;
        for (const r of decoding) c.jumpForwardTokens += r.tokens.length - 1;
      },
    };
  }
}
