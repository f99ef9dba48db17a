/**
 * The continuous-batching engine of one model, inside one worker thread. A step reads as its
 * stages, each owned by its own module:
 *
 *   schedule   (schedule.ts)   aborted requests leave, the next waiting one is admitted; the plan
 *                              names the decoding rows and the prompt chunk to run
 *   execute    (runner/)       the forward pass over the KV rows
 *   constrain  (constrain.ts)  each constrained sequence fills its allowed-token mask (while the
 *                              forward pass runs: masks depend only on tokens already accepted)
 *   sample     (sample/)       one token per sequence from its logits row and mask
 *   update     (update.ts)     tokens join their sequences: stop checks, text, events; finished
 *                              rows leave the batch
 *
 * Per-request setup (validation, tokenization, samplers, stop rules) happens once, at submit
 * (admission.ts), its tokenization in the model's tokenizer thread (prompt/), so no prompt delays a
 * step: a request that cannot be set up fails alone. Requests join and leave at step
 * boundaries.
 */
import type { DecoderConfig } from "../model/model-config.ts";
import { RequestError } from "../request-error.ts";
import type { ForwardResult, ModelRunner, RowTokens } from "../runner/batch-runner.ts";
import type { KvDtype } from "../runner/kv-rows.ts";
import type { SampledToken } from "../sample/params.ts";
import { GrammarBackend } from "../structured/grammar-backend.ts";
import { readGrammarVocabulary } from "../structured/vocabulary.ts";
import type { EngineCoreConfig, EngineEvent, EngineRequest } from "../types.ts";
import type { ActiveRequest, EventSink, Row } from "./active-request.ts";
import { admit, type PromptTokenizer, prepare } from "./admission.ts";
import { BeamRow } from "./beam-group.ts";
import { MaskRows, type TokenConstraint } from "./constrain.ts";
import { collectPromptLogprobs } from "./prompt-logprobs.ts";
import { type PrefillChunk, Scheduler } from "./schedule.ts";
import { Sequence } from "./sequence.ts";
import { advanceBeams, deliver, emitPrompt } from "./update.ts";

export type { EventSink, PromptTokenizer };
export { RequestError };

export interface EngineStats {
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
  /** Cumulative time in decode forward passes vs. in sampling + output processing of their rows. */
  decodeForwardMs: number;
  decodeSampleMs: number;
  decodeSteps: number;
  decodedTokens: number;
  /** Output tokens that joined by jump-forward (computed without a step of their own). */
  jumpForwardTokens: number;
  /** Steps whose decode rows and prompt chunk went through one forward pass. */
  mixedSteps: number;
  /**
   * Steps begun: each one forward pass; more where the runner takes no ragged tokens (a prompt chunk
   * and each row's jump-forward tokens then take passes of their own) or the chunk needs every
   * position's logits.
   */
  steps: number;
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

/**
 * ORTSERVE_MIXED_STEPS=0 runs the decode rows and a prompt chunk as two passes even where the
 * runner can run them as one (to measure what one pass saves).
 */
const MIXED_STEPS = process.env.ORTSERVE_MIXED_STEPS !== "0";

export class EngineCore {
  readonly config: EngineCoreConfig;
  readonly model: DecoderConfig;
  private readonly runner: ModelRunner;
  private readonly tokenize: PromptTokenizer;
  private readonly scheduler: Scheduler;
  private readonly masks: MaskRows;
  /** Structured outputs' grammars over this model's vocabulary, made on the first constrained request. */
  private grammars: GrammarBackend | undefined;
  private arrivals = 0;
  private readonly timing = {
    decodeForwardMs: 0,
    decodeSampleMs: 0,
    decodeSteps: 0,
    decodedTokens: 0,
    jumpForwardTokens: 0,
    mixedSteps: 0,
  };
  private looping = false;
  private stepsBegun = 0;
  private readonly aborts = { freed: 0, maxStepsAfter: 0 };
  private readonly runtime: EngineRuntime;

  constructor(
    config: EngineCoreConfig,
    model: DecoderConfig,
    runner: ModelRunner,
    tokenize: PromptTokenizer,
    runtime: EngineRuntime,
  ) {
    this.runtime = runtime;
    this.config = config;
    this.model = model;
    this.runner = runner;
    this.tokenize = tokenize;
    this.scheduler = new Scheduler(config, runner.kv);
    this.scheduler.onDropped = (a) => {
      this.aborts.freed++;
      const after = this.stepsBegun - (a.abortedAtStep ?? this.stepsBegun);
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
      ...this.timing,
      steps: this.stepsBegun,
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
      active.abortedAtStep = this.stepsBegun;
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
    for (const o of this.scheduler.inFlight())
      o.emit({ type: "error", code: "engine_failure", message: `engine step failed: ${message}` });
    this.scheduler.clearRunning();
  }

  private async step(): Promise<void> {
    // Aborted requests leave in schedule(), before the step's forward pass begins.
    const plan = this.scheduler.schedule();
    if (plan.decode.length > 0 || plan.prefill) this.stepsBegun++;
    const chunk = plan.prefill && this.mixes(plan.prefill) ? plan.prefill : undefined;
    const jumps = plan.decode.some((d) => d.seq instanceof Sequence && d.seq.forced.length > 0);
    if (plan.decode.length > 0 && this.runner.mixes && (chunk || jumps)) {
      await this.raggedStep(plan.decode, chunk);
      if (plan.prefill && !chunk) await this.prefillStep(plan.prefill);
      return;
    }
    if (plan.decode.length > 0) await this.decodeStep(plan.decode);
    if (plan.prefill) await this.prefillStep(plan.prefill);
  }

  /**
   * Whether the decode rows and the prompt chunk go through one forward pass: the runner can, and
   * the chunk needs only its last position's logits (prompt logprobs and logits need them all).
   */
  private mixes(chunk: PrefillChunk): boolean {
    const a = chunk.request;
    return MIXED_STEPS && this.runner.mixes && a.req.promptLogprobs === undefined && !a.req.promptLogits;
  }

  /**
   * The decode rows, their jump-forward tokens and the prompt chunk (if any) in one forward pass,
   * which reads the weights once for all of them; then the decode rows' stages, then the prompt's,
   * as separate passes would run them. A row with forced tokens samples from its last one's logits.
   */
  private async raggedStep(rows: readonly Row[], chunk?: PrefillChunk): Promise<void> {
    const forced = rows.map((d) => (d.seq instanceof Sequence ? d.seq.takeForced() : []));
    const runs: RowTokens[] = rows.map((d, r) => ({
      tokens: [d.seq.lastToken, ...forced[r]!],
      start: d.seq.length,
    }));
    if (chunk) {
      this.timing.mixedSteps++;
      runs.push({ tokens: chunk.tokens, start: chunk.start });
    }
    const a = chunk?.request;
    let last: ForwardResult | undefined;
    const n = rows.length;
    const forward = this.runner.ragged(runs).then(({ logits, vocab }) => {
      // The forced tokens are in the cache now (decodeStep counts each row's last token).
      rows.forEach((d, r) => {
        d.seq.length += forced[r]!.length;
        this.timing.jumpForwardTokens += forced[r]!.length;
      });
      if (a && chunk) {
        // In the cache now, so a row move (the decode rows' compact) carries the chunk along.
        a.computed += chunk.tokens.length;
        // Copied, and only when the prompt is complete (the first tokens come from it): the logits'
        // memory is the session's, which a later pass reuses.
        last = {
          logits:
            a.computed < a.promptIds.length ? new Float32Array(0) : logits.slice(n * vocab, (n + 1) * vocab),
          vocab,
        };
      }
      return { logits: logits.subarray(0, n * vocab), vocab };
    });
    await this.decodeStep(rows, forward);
    if (a) await this.promptChunkDone(a, last!);
  }

  private async decodeStep(
    rows: readonly Row[],
    forward = this.runner.decode(
      rows.map((d) => d.seq.lastToken),
      rows.map((d) => d.seq.length),
    ),
  ): Promise<void> {
    const t0 = performance.now();
    // The constrain stage runs while the forward pass does.
    const masks = await this.buildMasks(rows, forward);
    const { logits, vocab } = await forward;
    let t1 = performance.now();
    for (const d of rows) d.seq.length += 1;
    const live = rows.map((d, r) => ({ d, r, logits: logits.subarray(r * vocab, (r + 1) * vocab) }));
    const choices = live.filter(
      ({ d }) => !d.owner.aborted && !d.seq.finished && !(d.seq instanceof BeamRow),
    );
    // Where the runner takes no ragged tokens, a row with jump-forward tokens samples after them,
    // from a pass of its own (below); otherwise raggedStep put them in this pass.
    const jumping = choices.filter(({ d }) => (d.seq as Sequence).forced.length > 0);
    const sampling = choices.filter(({ d }) => (d.seq as Sequence).forced.length === 0);
    const sequences = sampling.map(({ d }) => d.seq as Sequence);
    const sampled: SampledToken[] = sequences.map((seq, i) =>
      seq.sample(sampling[i]!.logits, masks.get(seq)),
    );
    sequences.forEach((seq, i) => {
      deliver(sampling[i]!.d.owner, seq, sampled[i]!);
    });
    await this.advanceBeamRows(live);
    // Sampling is done with the batch's logits before another pass may reuse their memory.
    for (const { d, r } of jumping) {
      const t2 = performance.now();
      const seq = d.seq as Sequence;
      const forced = seq.takeForced();
      const out = await this.runner.prefill(r, forced, seq.length);
      seq.length += forced.length;
      this.timing.jumpForwardTokens += forced.length;
      const t3 = performance.now();
      t1 += t3 - t2;
      deliver(d.owner, seq, seq.sample(out.logits.subarray(out.logits.length - vocab), masks.get(seq)));
    }
    this.scheduler.compact();
    const t = this.timing;
    t.decodeForwardMs += t1 - t0;
    t.decodeSampleMs += performance.now() - t1;
    t.decodeSteps += 1;
    t.decodedTokens += rows.length;
  }

  /** Each constrained, live sequence's mask for this step (none when no row has a constraint). */
  private async buildMasks(
    rows: readonly Row[],
    forward: Promise<unknown>,
  ): Promise<Map<Sequence, Uint32Array>> {
    const out = new Map<Sequence, Uint32Array>();
    const constrained = rows
      .map((d) => d.seq)
      .filter((s): s is Sequence => !(s instanceof BeamRow) && !s.finished && s.constraint !== undefined);
    if (constrained.length === 0) return out;
    try {
      const masks = await this.masks.build(constrained);
      constrained.forEach((s, i) => {
        out.set(s, masks[i]!);
      });
      return out;
    } catch (err) {
      // The forward pass's own failure, if any, is reported by the caller's await; not twice.
      forward.catch(() => {});
      throw err;
    }
  }

  /** Beam groups advance as a whole, with one logits row per live beam in the group's order. */
  private async advanceBeamRows(live: { d: Row; logits: Float32Array }[]): Promise<void> {
    const byGroup = new Map<ActiveRequest, Map<BeamRow, Float32Array>>();
    for (const { d, logits } of live) {
      if (!(d.seq instanceof BeamRow) || d.owner.aborted || d.seq.finished) continue;
      const rows = byGroup.get(d.owner) ?? new Map<BeamRow, Float32Array>();
      byGroup.set(d.owner, rows);
      rows.set(d.seq, logits);
    }
    for (const [owner, rows] of byGroup)
      await advanceBeams(
        owner,
        owner.beams!.rows.map((b) => rows.get(b)!),
        this.runner.kv,
        (b) => this.scheduler.rowOf(b),
      );
  }

  private async prefillStep(chunk: PrefillChunk): Promise<void> {
    const a = chunk.request;
    const allRows = a.req.promptLogprobs !== undefined || a.req.promptLogits === true;
    const out = await this.runner.prefill(
      this.scheduler.prefillRow,
      chunk.tokens,
      chunk.start,
      allRows ? 0 : 1,
    );
    const { logits, vocab } = out;
    if (a.req.promptLogprobs !== undefined)
      collectPromptLogprobs(a, logits, vocab, chunk.start, chunk.tokens.length, this.tokenize.tokenizer);
    if (a.req.promptLogits) a.promptLogits.push(logits.slice());
    a.computed += chunk.tokens.length;
    await this.promptChunkDone(a, out);
  }

  /**
   * After a prompt chunk (its positions counted in `a.computed`): once the whole prompt is in, the
   * prompt event, its rows, and each choice's first token from the last position's logits.
   */
  private async promptChunkDone(a: ActiveRequest, { logits, vocab }: ForwardResult): Promise<void> {
    if (a.computed < a.promptIds.length) return;

    emitPrompt(a, vocab);
    this.scheduler.promptDone(a);
    if (a.maxTokens === 0) return;
    const last = logits.subarray(logits.length - vocab);
    // The first beam step expands the root beam alone.
    if (a.beams) await advanceBeams(a, [last], this.runner.kv, (b) => this.scheduler.rowOf(b));
    else {
      // Every choice samples its first token from the prompt's last logits.
      const masks = await this.masks.build(a.sequences);
      const sampled = a.sequences.map((seq, i) => seq.sample(last, masks[i]));
      a.sequences.forEach((seq, i) => {
        deliver(a, seq, sampled[i]!);
      });
    }
    this.scheduler.compact();
  }
}
