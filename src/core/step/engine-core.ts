/**
 * The continuous-batching engine of one model, inside one worker thread. A step is five calls
 * over plain data, each stage owned by its own module:
 *
 *   plan    = schedule()                 schedule.ts   aborted requests leave, waiting ones are
 *                                                      admitted while rows and the step's prompt
 *                                                      tokens last; per row: start, tokens, logits kept
 *   out     = runner.execute(plan)       runner/       the BatchLayout applies the plan's KV work, then
 *                                                      one ragged pass, or separate passes
 *   masks   = constrain(plan)            constrain.ts  allowed-token masks, while the pass runs
 *   sampled = sample(plan, out, masks)   sample.ts     each choice's token, each beam search's rows
 *   update(plan, sampled)                update.ts     tokens join their choices: stop checks, text,
 *                                                      events; prompts start decoding; requests finish
 *
 * Per-request setup (validation, tokenization, samplers, stop rules) happens once, at submit
 * (admission.ts), its tokenization in the model's tokenizer thread (prompt/), so no prompt delays a
 * step: a request that cannot be set up fails alone. Requests join and leave at step
 * boundaries.
 */
import type { PrefixCache } from "../cache/prefix-cache.ts";
import type { DecoderConfig } from "../model/model-config.ts";
import { RequestError } from "../request-error.ts";
import type { ModelRunner } from "../runner/batch-runner.ts";
import type { KvDtype } from "../runner/kv-rows.ts";
import { GrammarBackend } from "../structured/grammar-backend.ts";
import { readGrammarVocabulary } from "../structured/vocabulary.ts";
import type { EngineCoreConfig, EngineEvent, EngineRequest } from "../types.ts";
import type { ActiveRequest, EventSink } from "./active-request.ts";
import { admit, type PromptTokenizer, prepare } from "./admission.ts";
import { constrain, MaskRows, type TokenConstraint } from "./constrain.ts";
import { sample } from "./sample.ts";
import { Scheduler } from "./schedule.ts";
import { type StepCounters, StepTiming } from "./step-timing.ts";
import { type UpdateContext, update } from "./update.ts";

export type { EventSink, PromptTokenizer };
export { RequestError };

export interface EngineStats extends StepCounters {
  waiting: number;
  /** Callers' shares with requests waiting, and whether admission alternates between them. */
  waitingShares: number;
  fairShare: boolean;
  running: number;
  kvBytes: number;
  kvUsedBytes: number;
  /** The cache's element type, and the bytes one token takes in it across layers. */
  kvCacheDtype: KvDtype;
  kvBytesPerToken: number;
  prefixCacheBytes: number;
  /** Aborted requests freed, and the most steps any of them still had begun after its abort arrived. */
  abortsFreed: number;
  abortFreeStepsMax: number;
  /** What computes the model: see EngineRuntime. */
  runtime: EngineRuntime;
}

/**
 * What runs the model's attention (ortserve's operator or ONNX Runtime's GroupQueryAttention) and
 * its projections (ortserve's BlockQuantMatMul and the instruction set of its kernel, or ONNX
 * Runtime's MatMulNBits / MatMul), so an operator can see which path a machine takes.
 */
export interface EngineRuntime {
  attention: "ortserve" | "onnxruntime";
  projections: string;
  projectionKernel?: string;
  /** With BlockQuantMatMul: the bytes its packed weights take, which every decode step reads. */
  packedWeightBytes?: number;
}

export class EngineCore {
  readonly config: EngineCoreConfig;
  readonly model: DecoderConfig;
  private readonly runner: ModelRunner;
  private readonly tokenize: PromptTokenizer;
  private readonly scheduler: Scheduler;
  private readonly masks: MaskRows;
  /** Structured outputs' grammars over this model's vocabulary, made on the first constrained request. */
  private grammars: GrammarBackend | undefined;
  private readonly updates: UpdateContext;
  private arrivals = 0;
  private readonly timing = new StepTiming();
  private looping = false;
  private readonly aborts = { freed: 0, maxStepsAfter: 0 };
  private readonly runtime: EngineRuntime;

  constructor(
    config: EngineCoreConfig,
    model: DecoderConfig,
    runner: ModelRunner,
    tokenize: PromptTokenizer,
    runtime: EngineRuntime,
    prefixCache: PrefixCache,
  ) {
    this.runtime = runtime;
    this.config = config;
    this.model = model;
    this.runner = runner;
    this.tokenize = tokenize;
    this.scheduler = new Scheduler(config, prefixCache, runner.batchesPrompts);
    this.updates = { scheduler: this.scheduler, tokenizer: tokenize.tokenizer };
    this.scheduler.onDropped = (a) => {
      this.aborts.freed++;
      const steps = this.timing.counters.steps;
      const after = steps - (a.abortedAtStep ?? steps);
      this.aborts.maxStepsAfter = Math.max(this.aborts.maxStepsAfter, after);
    };
    this.masks = new MaskRows(model.vocabSize);
  }

  stats(): EngineStats {
    const kv = this.runner.kv;
    return {
      waiting: this.scheduler.waitingCount,
      waitingShares: this.scheduler.waitingShares,
      fairShare: this.config.fairShare,
      running: this.scheduler.runningCount,
      kvBytes: kv.bytes,
      kvUsedBytes: this.scheduler.usedPositions * kv.bytesPerToken,
      kvCacheDtype: kv.dtype,
      kvBytesPerToken: kv.bytesPerToken,
      prefixCacheBytes: this.scheduler.prefixCacheBytes,
      ...this.timing.counters,
      abortsFreed: this.aborts.freed,
      abortFreeStepsMax: this.aborts.maxStepsAfter,
      runtime: this.runtime,
    };
  }

  /** The structured-output backend of this model's vocabulary. */
  structuredBackend(): GrammarBackend {
    this.grammars ??= new GrammarBackend(
      readGrammarVocabulary(this.config.modelDir, this.model.vocabSize, this.model.eosTokenIds),
      { compileTimeoutMs: this.config.grammarCompileTimeoutMs },
    );
    return this.grammars;
  }

  /**
   * Sets the request up and queues it; rejects with RequestError for a request that cannot be
   * served (a structured-output constraint is checked and compiled first).
   */
  async submit(req: EngineRequest, emit: EventSink): Promise<{ abort(): void }> {
    const ctx = { config: this.config, model: this.model, tokenize: this.tokenize };
    const prepared = await prepare(req, ctx);
    let constraints: TokenConstraint[] | undefined;
    // One constraint per choice, or per beam row with beam search (n is the beam width).
    if (req.constraint) constraints = await this.structuredBackend().constraints(req.constraint, req.n);
    const markAborted = () => {
      if (active.aborted) return;
      active.aborted = true;
      active.abortedAtStep = this.timing.counters.steps;
    };
    const active: ActiveRequest = admit(
      req,
      (e: EngineEvent) => {
        // A failing sink must never stop the loop (it would strand every other request's rows).
        try {
          emit(e);
        } catch {
          markAborted();
        }
      },
      this.arrivals++,
      ctx,
      prepared,
      constraints,
    );
    this.scheduler.add(active);
    this.kick();
    return {
      abort: () => {
        markAborted();
        this.kick();
      },
    };
  }

  /**
   * Frees the model's session once the engine is idle (its last steps may still be dropping
   * finished or aborted rows). Only for an engine no request will reach again.
   */
  async close(): Promise<void> {
    while (this.looping || this.scheduler.hasWork()) await new Promise((r) => setImmediate(r));
    await this.grammars?.close();
    await this.tokenize.prompts?.close();
    await this.runner.release();
  }

  private kick(): void {
    if (this.looping) return;
    this.looping = true;
    // Run steps until idle; each await lets new submissions and aborts arrive between steps.
    setImmediate(() => {
      this.loop().finally(() => {
        this.looping = false;
      });
    });
  }

  private async loop(): Promise<void> {
    while (this.scheduler.hasWork()) {
      try {
        await this.step();
      } catch (err) {
        this.failAll(err instanceof Error ? err.message : String(err));
      }
      await new Promise((r) => setImmediate(r));
    }
  }

  /** A failed forward pass leaves the cache in an unknown state: every in-flight request fails. */
  private failAll(message: string): void {
    for (const a of this.scheduler.inFlight()) {
      a.state = "finished";
      a.emit({ type: "error", code: "engine_failure", message: `engine step failed: ${message}` });
    }
    this.scheduler.clearRunning();
    this.runner.reset();
  }

  private async step(): Promise<void> {
    const plan = this.scheduler.schedule();
    if (plan.runs.length === 0) return;
    const clock = this.timing.begin(plan);
    const out = this.runner.execute(plan);
    const masks = await constrain(plan, this.masks, out);
    const sampled = sample(plan, await clock.executed(out), masks);
    await update(plan, sampled, this.updates);
    clock.end();
  }
}
