/**
 * The continuous-batching loop of one model, inside one worker thread.
 *
 * Each step: drop aborted requests → admit the next waiting request (when rows are free and no
 * other prompt is being prefilled) → one decode step for every decoding row → one prefill chunk of
 * the admitted prompt. Requests join and leave at step boundaries.
 *
 * KV rows: rows [0, decoding) decode together (one contiguous batch tensor); the prompt being
 * prefilled sits at row `decoding`, its extra choices (n > 1) are forked from it once the prompt
 * is in the cache. A finished row is filled by moving the last decoding row into it.
 */
import type { InferenceSession } from "onnxruntime-node";
import { PREFIX_BLOCK, PrefixCache } from "../cache/prefix-cache.ts";
import { SequenceText } from "../output/sequence-text.ts";
import { tokenLogprobText } from "../output/token-text.ts";
import type { TokenizerLike } from "../output/tokenizer-like.ts";
import { BatchRunner } from "../runner/batch-runner.ts";
import { KvSlots } from "../runner/kv-slots.ts";
import type { DecoderConfig } from "../runner/model-config.ts";
import { logSumExp, rankOf, toLogprob } from "../sample/ops/logprobs.ts";
import { randomSeed, seedForChoice } from "../sample/ops/rng.ts";
import { topN } from "../sample/ops/select.ts";
import { SequenceSampler } from "../sample/sampler.ts";
import { RequestQueue } from "../scheduler/request-queue.ts";
import type { EngineCoreConfig, EngineEvent, EngineRequest, PromptTokenLogprob } from "../types.ts";
import { BeamGroup, BeamRow } from "./beam-group.ts";
import { Sequence } from "./sequence.ts";

export type EventSink = (event: EngineEvent) => void;

/** Text ↔ ids, as the worker's tokenizer provides them. */
export interface PromptTokenizer {
  encode(text: string, addSpecialTokens: boolean): number[];
  tokenizer: TokenizerLike;
}

export class RequestError extends Error {
  readonly code: "invalid_request" | "priority_not_supported";
  readonly param?: string;
  constructor(code: "invalid_request" | "priority_not_supported", message: string, param?: string) {
    super(message);
    this.code = code;
    this.param = param;
  }
}

interface ActiveRequest {
  req: EngineRequest;
  emit: EventSink;
  priority: number;
  arrival: number;
  promptIds: number[];
  maxTokens: number;
  /** Prompt positions already in the KV cache (prefix hits, then prefill chunks). */
  computed: number;
  cachedTokens: number;
  sequences: Sequence[];
  promptLogprobs: (PromptTokenLogprob | null)[];
  aborted: boolean;
  finishedChoices: number;
  /** Set for use_beam_search requests: their rows are BeamRows. */
  beams?: BeamGroup;
}

type Row = { seq: Sequence | BeamRow; owner: ActiveRequest };

export interface EngineStats {
  waiting: number;
  running: number;
  kvBytes: number;
  kvUsedBytes: number;
  prefixCacheBytes: number;
  /** Cumulative time in decode forward passes vs. in sampling + output processing of their rows. */
  decodeForwardMs: number;
  decodeSampleMs: number;
  decodeSteps: number;
  decodedTokens: number;
}

export class EngineCore {
  readonly config: EngineCoreConfig;
  readonly model: DecoderConfig;
  private readonly runner: BatchRunner;
  private readonly tokenize: PromptTokenizer;
  private readonly prefixCache: PrefixCache;
  private readonly waiting: RequestQueue<ActiveRequest>;
  /** Decoding rows, in row order. */
  private readonly decoding: Row[] = [];
  private prefilling: ActiveRequest | undefined;
  private arrivals = 0;
  private readonly timing = { decodeForwardMs: 0, decodeSampleMs: 0, decodeSteps: 0, decodedTokens: 0 };
  private looping = false;

  constructor(
    config: EngineCoreConfig,
    model: DecoderConfig,
    session: InferenceSession,
    tokenize: PromptTokenizer,
  ) {
    this.config = config;
    this.model = model;
    const kv = new KvSlots(
      { layers: model.numLayers, kvHeads: model.numKvHeads, headDim: model.headDim },
      config.maxNumSeqs,
      config.maxModelLen,
    );
    this.runner = new BatchRunner(session, kv);
    this.tokenize = tokenize;
    this.prefixCache = new PrefixCache(config.prefixCacheBytes);
    this.waiting = new RequestQueue(config.schedulingPolicy);
  }

  stats(): EngineStats {
    const kv = this.runner.kv;
    const used = this.decoding.reduce((s, d) => s + d.seq.length, this.prefilling?.computed ?? 0);
    return {
      waiting: this.waiting.length,
      running: this.decoding.length + (this.prefilling ? 1 : 0),
      kvBytes: kv.bytes,
      kvUsedBytes: used * kv.bytesPerToken,
      prefixCacheBytes: this.prefixCache.usedBytes,
      ...this.timing,
    };
  }

  /** Validates and queues a request; throws RequestError for requests that cannot be served. */
  submit(req: EngineRequest, emit: EventSink): { abort(): void } {
    if (req.priority !== 0 && this.config.schedulingPolicy !== "priority")
      throw new RequestError(
        "priority_not_supported",
        `priority ${req.priority} was given, but model scheduling policy is "fcfs"; priority scheduling is not enabled for this model`,
        "priority",
      );
    if (req.n > this.config.maxNumSeqs)
      throw new RequestError(
        "invalid_request",
        `n=${req.n} exceeds max_num_seqs=${this.config.maxNumSeqs}`,
        "n",
      );
    const { promptIds, maxTokens } = this.preparePrompt(req);
    const active: ActiveRequest = {
      req,
      // A failing sink must never stop the loop (it would strand every other request's rows).
      emit: (e) => {
        try {
          emit(e);
        } catch {
          active.aborted = true;
        }
      },
      priority: req.priority,
      arrival: this.arrivals++,
      promptIds,
      maxTokens,
      computed: 0,
      cachedTokens: 0,
      sequences: [],
      promptLogprobs: [null],
      aborted: false,
      finishedChoices: 0,
    };
    this.waiting.push(active);
    this.kick();
    return {
      abort: () => {
        active.aborted = true;
        this.kick();
      },
    };
  }

  private preparePrompt(req: EngineRequest): { promptIds: number[]; maxTokens: number } {
    const L = this.config.maxModelLen;
    let ids =
      "tokenIds" in req.prompt
        ? req.prompt.tokenIds
        : this.tokenize.encode(req.prompt.text, req.prompt.addSpecialTokens);
    const vocab = this.model.vocabSize;
    const bad = ids.find((t) => !Number.isInteger(t) || t < 0 || t >= vocab);
    if (bad !== undefined)
      throw new RequestError("invalid_request", `prompt token id ${bad} is outside [0, ${vocab})`);
    if (req.truncatePromptTokens !== undefined) {
      const keep = req.truncatePromptTokens === -1 ? L - (req.maxTokens ?? 1) : req.truncatePromptTokens;
      if (keep > L - (req.maxTokens ?? 1))
        throw new RequestError(
          "invalid_request",
          `truncate_prompt_tokens=${req.truncatePromptTokens} leaves no room for the completion in a context of ${L} tokens`,
          "truncate_prompt_tokens",
        );
      if (ids.length > keep) ids = ids.slice(ids.length - keep);
    }
    if (ids.length === 0) throw new RequestError("invalid_request", "the prompt is empty", "messages");
    if (req.maxTokens === undefined) {
      if (ids.length >= L)
        throw new RequestError(
          "invalid_request",
          `This model's maximum context length is ${L} tokens. However, your messages resulted in ${ids.length} tokens, leaving no room for a completion. Please reduce the length of the messages.`,
          "messages",
        );
      return { promptIds: ids, maxTokens: L - ids.length };
    }
    if (ids.length + req.maxTokens > L)
      throw new RequestError(
        "invalid_request",
        `This model's maximum context length is ${L} tokens. However, you requested ${ids.length + req.maxTokens} tokens (${ids.length} in the messages, ${req.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
        req.maxTokensField ?? "max_tokens",
      );
    return { promptIds: ids, maxTokens: req.maxTokens };
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

  private hasWork(): boolean {
    return this.waiting.length > 0 || this.decoding.length > 0 || this.prefilling !== undefined;
  }

  private async loop(): Promise<void> {
    while (this.hasWork()) {
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
    const owners = new Set<ActiveRequest>([...this.decoding.map((d) => d.owner)]);
    if (this.prefilling) owners.add(this.prefilling);
    for (const o of owners)
      o.emit({ type: "error", code: "engine_failure", message: `engine step failed: ${message}` });
    this.decoding.length = 0;
    this.prefilling = undefined;
  }

  private async step(): Promise<void> {
    this.dropAborted();
    this.admit();
    if (this.decoding.length > 0) await this.decodeStep();
    if (this.prefilling) await this.prefillStep(this.prefilling);
  }

  private dropAborted(): void {
    for (const w of [...this.waiting]) if (w.aborted) this.waiting.remove(w);
    for (let r = this.decoding.length - 1; r >= 0; r--) {
      const d = this.decoding[r]!;
      if (d.owner.aborted) this.finishRow(r, "abort", null);
    }
    if (this.prefilling?.aborted) this.prefilling = undefined;
  }

  private admit(): void {
    if (this.prefilling) return;
    const next = this.waiting.peek();
    if (!next || this.decoding.length + next.req.n > this.config.maxNumSeqs) return;
    this.waiting.shift();
    this.prefilling = next;
    this.loadCachedPrefix(next);
  }

  private prefixKeys(a: ActiveRequest): string[] {
    return PrefixCache.blockKeys(a.promptIds, a.req.cacheSalt ?? "");
  }

  /** Copies cached prefix blocks into the request's row (at least one prompt token is always computed). */
  private loadCachedPrefix(a: ActiveRequest): void {
    // Prompt logprobs need logits for every prompt position, so such requests compute them all.
    if (this.config.prefixCacheBytes <= 0 || a.req.promptLogprobs !== undefined) return;
    const keys = this.prefixKeys(a).slice(0, Math.floor((a.promptIds.length - 1) / PREFIX_BLOCK));
    const blocks = this.prefixCache.lookup(keys);
    if (blocks.length === 0) return;
    const row = this.decoding.length;
    this.runner.kv.ensurePositions(blocks.length * PREFIX_BLOCK);
    blocks.forEach((data, i) => {
      this.runner.kv.writePositions(row, i * PREFIX_BLOCK, PREFIX_BLOCK, data);
    });
    a.computed = a.cachedTokens = blocks.length * PREFIX_BLOCK;
  }

  private storePrefix(a: ActiveRequest, row: number): void {
    if (this.config.prefixCacheBytes <= 0) return;
    this.prefixKeys(a).forEach((key, i) => {
      if (!this.prefixCache.has(key))
        this.prefixCache.insert(key, this.runner.kv.readPositions(row, i * PREFIX_BLOCK, PREFIX_BLOCK));
    });
  }

  private async prefillStep(a: ActiveRequest): Promise<void> {
    const row = this.decoding.length;
    const start = a.computed;
    const chunk = a.promptIds.slice(start, start + this.config.prefillChunk);
    const wantPromptLogprobs = a.req.promptLogprobs !== undefined;
    const { logits, vocab } = await this.runner.prefill(row, chunk, start, wantPromptLogprobs ? 0 : 1);
    if (wantPromptLogprobs) this.collectPromptLogprobs(a, logits, vocab, start, chunk.length);
    a.computed += chunk.length;
    if (a.computed < a.promptIds.length) return;

    this.prefilling = undefined;
    this.storePrefix(a, row);
    const last = logits.subarray(logits.length - vocab);
    a.emit({
      type: "prompt",
      promptTokenIds: a.promptIds,
      cachedTokens: a.cachedTokens,
      promptLogprobs: wantPromptLogprobs ? a.promptLogprobs : undefined,
    });
    if (a.req.useBeamSearch) this.startBeams(a, last);
    else {
      this.startChoices(a, row);
      // Every choice samples its first token from the prompt's last logits.
      for (const seq of a.sequences) this.deliver(a, seq, last);
    }
    this.compact();
  }

  /** Logprob of each next prompt token (and the top alternatives) from a chunk's logits rows. */
  private collectPromptLogprobs(
    a: ActiveRequest,
    logits: Float32Array,
    vocab: number,
    start: number,
    n: number,
  ): void {
    const k = a.req.promptLogprobs ?? 0;
    const ids = new Int32Array(Math.max(k, 1));
    const vals = new Float64Array(Math.max(k, 1));
    const tok = this.tokenize.tokenizer;
    const asIds = a.req.returnTokensAsTokenIds;
    for (let i = 0; i < n; i++) {
      const target = start + i + 1;
      if (target >= a.promptIds.length) break;
      const row = logits.subarray(i * vocab, (i + 1) * vocab);
      const lse = logSumExp(row);
      const id = a.promptIds[target]!;
      const entries = [{ tokenId: id, logprob: toLogprob(row[id]!, lse), rank: rankOf(row, id), token: "" }];
      const found = k > 0 ? topN(row, vocab, k, ids, vals) : 0;
      for (let j = 0; j < found; j++)
        if (ids[j] !== id)
          entries.push({ tokenId: ids[j]!, logprob: toLogprob(vals[j]!, lse), rank: j + 1, token: "" });
      for (const e of entries) e.token = tokenLogprobText(tok, e.tokenId, asIds);
      a.promptLogprobs.push({ entries });
    }
  }

  /** Creates the request's choices: choice 0 owns the prefilled row, the others get copies of it. */
  private startChoices(a: ActiveRequest, row: number): void {
    const r = a.req;
    const s = r.sampling;
    const seed = s.seed ?? randomSeed();
    const eos = new Set(this.model.eosTokenIds);
    const badWordsTokenIds = (s.badWords ?? []).flatMap((w) => {
      const plain = this.tokenize.encode(w, false);
      const spaced = this.tokenize.encode(` ${w}`, false);
      return plain.join() === spaced.join() ? [plain] : [plain, spaced];
    });
    for (let i = 0; i < r.n; i++) {
      const sampler = new SequenceSampler(
        {
          temperature: s.temperature,
          topP: s.topP,
          topK: s.topK,
          minP: s.minP,
          repetitionPenalty: s.repetitionPenalty,
          frequencyPenalty: s.frequencyPenalty,
          presencePenalty: s.presencePenalty,
          logitBias: s.logitBias ? new Map(s.logitBias) : undefined,
          allowedTokenIds: s.allowedTokenIds,
          badWordsTokenIds: badWordsTokenIds.length ? badWordsTokenIds : undefined,
          minTokens: s.minTokens,
          stopTokenIds: s.stopTokenIds,
          eosTokenIds: this.model.eosTokenIds,
          ignoreEos: s.ignoreEos,
          seed: seedForChoice(seed, i),
          logprobs: r.logprobs,
        },
        this.model.vocabSize,
        a.promptIds,
      );
      const text = new SequenceText(this.tokenize.tokenizer, {
        skipSpecialTokens: r.skipSpecialTokens,
        spacesBetweenSpecialTokens: r.spacesBetweenSpecialTokens,
        stop: r.stop,
        includeStopStrInOutput: r.includeStopStrInOutput,
        minTokens: s.minTokens,
        promptIds: a.promptIds,
      });
      const seq = new Sequence(
        i,
        sampler,
        text,
        this.tokenize.tokenizer,
        {
          maxTokens: a.maxTokens,
          minTokens: s.minTokens,
          eosTokenIds: eos,
          stopTokenIds: new Set(s.stopTokenIds),
          ignoreEos: s.ignoreEos,
          repetition: r.repetitionDetection,
          returnTokensAsTokenIds: r.returnTokensAsTokenIds,
          wantLogprobs: r.logprobs !== undefined,
        },
        a.promptIds.length,
      );
      if (i > 0) this.runner.kv.copyRow(row, row + i, a.promptIds.length);
      a.sequences.push(seq);
      this.decoding.push({ seq, owner: a });
    }
  }

  /** Beam search: beam_width rows start from the prompt's row; the first step expands the root beam. */
  private startBeams(a: ActiveRequest, lastLogits: Float32Array): void {
    const r = a.req;
    const group = new BeamGroup(
      a.promptIds.length,
      {
        beamWidth: r.n,
        maxTokens: a.maxTokens,
        eosTokenId: this.model.eosTokenIds[0] ?? -1,
        lengthPenalty: r.lengthPenalty,
        ignoreEos: r.sampling.ignoreEos,
        includeStopStrInOutput: r.includeStopStrInOutput,
      },
      this.tokenize.tokenizer,
      r.skipSpecialTokens,
    );
    a.beams = group;
    // Row 0 is the prefilled prompt (the root beam, id 0); the others receive copies on the first step.
    group.rows = Array.from(
      { length: r.n },
      (_, i) => new BeamRow(group, i === 0 ? 0 : -1, a.promptIds.length, -1),
    );
    for (const row of group.rows) this.decoding.push({ seq: row, owner: a });
    this.advanceBeams(a, [lastLogits]);
  }

  /** One beam-search step for a request from its live beams' logits rows. */
  private advanceBeams(a: ActiveRequest, logits: Float32Array[]): void {
    const group = a.beams!;
    group.advance(logits, (moves) => {
      const kv = this.runner.kv;
      const rowOf = (b: BeamRow) => this.decoding.findIndex((d) => d.seq === b);
      // Read every parent first: a row can be both a parent and a destination.
      const plan = moves.map((m) => ({ to: rowOf(m.to), from: rowOf(m.from), length: m.length }));
      const data = plan.map((m) => (m.from === m.to ? undefined : kv.readPositions(m.from, 0, m.length)));
      plan.forEach((m, i) => {
        if (data[i]) kv.writePositions(m.to, 0, m.length, data[i]!);
      });
    });
    if (group.search.done) {
      for (const e of group.results()) a.emit(e);
      a.finishedChoices = a.req.n;
      a.emit({ type: "done" });
    }
  }

  /** Samples one token for a sequence and forwards its events. */
  private deliver(a: ActiveRequest, seq: Sequence, logits: Float32Array): void {
    for (const e of seq.accept(logits)) a.emit(e);
    if (seq.finished) this.choiceFinished(a);
  }

  private choiceFinished(a: ActiveRequest): void {
    a.finishedChoices++;
    if (a.finishedChoices === a.req.n) a.emit({ type: "done" });
  }

  private async decodeStep(): Promise<void> {
    const tokens = this.decoding.map((d) => d.seq.lastToken);
    const lengths = this.decoding.map((d) => d.seq.length);
    const t0 = performance.now();
    const { logits, vocab } = await this.runner.decode(tokens, lengths);
    const t1 = performance.now();
    const beamLogits = new Map<ActiveRequest, Map<BeamRow, Float32Array>>();
    this.decoding.forEach((d, r) => {
      d.seq.length += 1;
      if (d.owner.aborted || d.seq.finished) return;
      const row = logits.subarray(r * vocab, (r + 1) * vocab);
      if (d.seq instanceof BeamRow) {
        let rows = beamLogits.get(d.owner);
        if (!rows) {
          rows = new Map();
          beamLogits.set(d.owner, rows);
        }
        rows.set(d.seq, row);
      } else this.deliver(d.owner, d.seq, row);
    });
    for (const [owner, rows] of beamLogits)
      this.advanceBeams(
        owner,
        owner.beams!.rows.map((b) => rows.get(b)!),
      );
    this.compact();
    const t = this.timing;
    t.decodeForwardMs += t1 - t0;
    t.decodeSampleMs += performance.now() - t1;
    t.decodeSteps += 1;
    t.decodedTokens += tokens.length;
  }

  /** Ends a row's sequence and frees the row. */
  private finishRow(row: number, reason: "abort", stopReason: null): void {
    const d = this.decoding[row]!;
    if (d.seq instanceof BeamRow) {
      // An aborted beam search ends as a whole once its last row is gone.
      d.seq.finished = true;
      this.removeRow(row);
      if (!this.decoding.some((x) => x.owner === d.owner)) d.owner.emit({ type: "done" });
      return;
    }
    if (!d.seq.finished) {
      d.owner.emit(d.seq.finishEvent(reason, stopReason));
      this.choiceFinished(d.owner);
    }
    this.removeRow(row);
  }

  /** Removes finished rows, moving the last decoding row (and the prefilling row) down into the gaps. */
  private compact(): void {
    for (let r = this.decoding.length - 1; r >= 0; r--) if (this.decoding[r]!.seq.finished) this.removeRow(r);
  }

  private removeRow(row: number): void {
    const kv = this.runner.kv;
    const last = this.decoding.length - 1;
    if (row !== last) {
      kv.copyRow(last, row, this.decoding[last]!.seq.length);
      this.decoding[row] = this.decoding[last]!;
    }
    this.decoding.pop();
    // The prompt being prefilled lives just after the decoding rows: keep it adjacent.
    if (this.prefilling && this.prefilling.computed > 0) kv.copyRow(last + 1, last, this.prefilling.computed);
  }
}
