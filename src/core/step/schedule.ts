/**
 * The schedule stage. Each step: aborted requests leave, and the plan names every row's work:
 * each decoding choice or beam its next tokens, each prompt being prefilled its next chunk. The
 * step's prompt tokens are at most `prefillChunk`: the prompt mid-prefill takes its share first,
 * then waiting requests are admitted in queue order (their cached prefix blocks looked up) while
 * rows are free and tokens are left, each taking what is left, so a prompt that does not fit
 * waits. Where the runner cannot batch prompts (ModelRunner.batchesPrompts), one prompt is
 * prefilled at a time. As in vLLM's scheduler there is no prefill or decode phase: each request
 * has positions computed and tokens known, and a run closes the gap.
 *
 * The scheduler never touches the KV cache. Where rows live, and the copies that keep them
 * contiguous, are the runner's BatchLayout's business: the plan carries what the layout must do
 * (admitted prompts with their prefix blocks, forks of complete prompts, beam copies, prefix saves).
 */
import { PREFIX_BLOCK, PrefixCache } from "../cache/prefix-cache.ts";
import type { KvBlock } from "../runner/kv-rows.ts";
import { FairShareQueue } from "../scheduler/fair-share.ts";
import { RequestQueue } from "../scheduler/request-queue.ts";
import type { EngineCoreConfig } from "../types.ts";
import {
  type ActiveRequest,
  finish,
  liveRows,
  needsPromptLogits,
  type SequenceRow,
} from "./active-request.ts";
import type { ScheduledRun, StepPlan } from "./plan.ts";

export class Scheduler {
  private readonly config: EngineCoreConfig;
  /** Looked up here at admission; the runner's BatchLayout loads and saves the blocks. */
  private readonly prefixCache: PrefixCache;
  private readonly waiting: RequestQueue<ActiveRequest> | FairShareQueue<ActiveRequest>;
  /** Admitted requests (prefilling or decoding), in admission order. */
  private readonly running: ActiveRequest[] = [];
  /** Layout work the update stage asked for, carried by the next plan. */
  private forks: StepPlan["forks"][number][] = [];
  private beamCopies: StepPlan["beamCopies"][number][] = [];
  private readonly blockKeys = new WeakMap<ActiveRequest, string[]>();
  /** Told of each aborted request as it leaves (queue, prefill or batch), once. */
  onDropped: (a: ActiveRequest) => void = () => {};

  /** Whether several prompts may be prefilled in one step (the runner's batchesPrompts). */
  private readonly severalPrompts: boolean;

  constructor(config: EngineCoreConfig, prefixCache: PrefixCache, severalPrompts = false) {
    this.config = config;
    this.prefixCache = prefixCache;
    this.severalPrompts = severalPrompts;
    this.waiting = config.fairShare
      ? new FairShareQueue(config.schedulingPolicy)
      : new RequestQueue(config.schedulingPolicy);
  }

  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Callers' shares with requests waiting (1 while any wait, without fair share). */
  get waitingShares(): number {
    return this.waiting instanceof FairShareQueue
      ? this.waiting.waitingShares
      : Math.min(1, this.waiting.length);
  }

  /** Rows in use: decoding choices and beams, and the prompts mid-prefill. */
  get runningCount(): number {
    return this.running.reduce((n, a) => n + (a.state === "prefilling" ? 1 : liveRows(a).length), 0);
  }

  /** Positions held by running sequences (decoding rows and the prompts mid-prefill). */
  get usedPositions(): number {
    let used = 0;
    for (const a of this.running)
      if (a.state === "prefilling") used += a.computed;
      else for (const r of liveRows(a)) used += r.length;
    return used;
  }

  get prefixCacheBytes(): number {
    return this.prefixCache.usedBytes;
  }

  add(a: ActiveRequest): void {
    this.waiting.push(a);
  }

  hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  /** Aborted requests leave, waiting ones may start; returns what runs this step. */
  schedule(): StepPlan {
    this.dropAborted();
    const runs: ScheduledRun[] = [];
    const prefixSaves: StepPlan["prefixSaves"][number][] = [];
    for (const a of this.running)
      if (a.state === "decoding") for (const row of liveRows(a)) runs.push(this.decodeRun(a, row));
    let budget = this.config.prefillChunk;
    const prefill = (a: ActiveRequest) => {
      const run = this.promptRun(a, budget);
      budget -= run.tokens.length;
      runs.push(run);
      // Every pass's complete blocks, not only once the prompt is done: a sliding-window layer's
      // ring holds a long prompt's early blocks only until later chunks overwrite them.
      const complete = Math.floor((run.start + run.tokens.length) / PREFIX_BLOCK);
      if (complete > Math.floor(run.start / PREFIX_BLOCK) && this.config.prefixCacheBytes > 0)
        prefixSaves.push({ slot: a, keys: this.prefixKeys(a).slice(0, complete) });
    };
    // A prompt takes less than the budget only when that completes it, so a prompt mid-prefill
    // is always the last admitted: the one left over from the last step takes its share first.
    for (const a of this.running) if (a.state === "prefilling") prefill(a);
    const admitted: StepPlan["admitted"][number][] = [];
    for (let next = this.admissible(budget); next; next = this.admissible(budget)) {
      admitted.push(this.admit(next));
      prefill(next);
    }
    const plan: StepPlan = { runs, admitted, forks: this.forks, beamCopies: this.beamCopies, prefixSaves };
    this.forks = [];
    this.beamCopies = [];
    return plan;
  }

  private decodeRun(a: ActiveRequest, row: SequenceRow): ScheduledRun {
    return {
      slot: row,
      request: a,
      row,
      start: row.length,
      tokens: row.nextTokens(),
      logits: "last",
      prompt: false,
      completesPrompt: false,
    };
  }

  /** The prompt's next chunk: as many of its tokens as the step's budget has left. */
  private promptRun(a: ActiveRequest, budget: number): ScheduledRun {
    const start = a.computed;
    const tokens = a.promptIds.slice(start, start + budget);
    // Its row would leave the batch with nothing to run (admission only spends a budget left over).
    if (tokens.length === 0) throw new Error("a prompt mid-prefill was given no tokens this step");
    const completesPrompt = start + tokens.length === a.promptIds.length;
    return {
      slot: a,
      request: a,
      start,
      tokens,
      logits: needsPromptLogits(a) ? "all" : completesPrompt ? "last" : "none",
      prompt: true,
      completesPrompt,
    };
  }

  /** Every request in flight (decoding or mid-prefill). */
  inFlight(): readonly ActiveRequest[] {
    return this.running;
  }

  /** Forgets every running request (after a failed forward pass the cache is in an unknown state). */
  clearRunning(): void {
    this.running.length = 0;
    this.forks = [];
    this.beamCopies = [];
  }

  private dropAborted(): void {
    for (const w of [...this.waiting])
      if (w.aborted) {
        this.waiting.remove(w);
        this.drop(w);
      }
    for (const a of [...this.running]) if (a.aborted) this.drop(a);
  }

  private drop(a: ActiveRequest): void {
    finish(a, "abort");
    this.leave(a);
    this.onDropped(a);
  }

  /** A finished request leaves the batch: its rows are not in the next plan, so the layout frees them. */
  leave(a: ActiveRequest): void {
    const i = this.running.indexOf(a);
    if (i >= 0) this.running.splice(i, 1);
  }

  /** Rows the running requests hold or will: a prompt mid-prefill will fork to its n choices or beams. */
  private reservedRows(): number {
    return this.running.reduce((n, a) => n + (a.state === "prefilling" ? a.req.n : liveRows(a).length), 0);
  }

  /** The next waiting request, if it may start now (queue order: fair share and priority decide). */
  private admissible(budget: number): ActiveRequest | undefined {
    if (budget <= 0) return undefined;
    if (!this.severalPrompts && this.running.some((a) => a.state === "prefilling")) return undefined;
    const next = this.waiting.peek();
    if (!next || this.reservedRows() + next.req.n > this.config.maxNumSeqs) return undefined;
    return next;
  }

  /**
   * The request starts prefilling from its cached prefix blocks. A prompt admitted in the step
   * another with the same prefix completes (or in the same step as it) misses the blocks that one
   * is about to save: the lookup happens now, the save after the pass. Its output is the same,
   * computed instead of loaded; only its cachedTokens are fewer.
   */
  private admit(next: ActiveRequest): StepPlan["admitted"][number] {
    this.waiting.shift();
    next.queueMs = performance.now() - next.queuedAt;
    next.state = "prefilling";
    this.running.push(next);
    const blocks = this.cachedPrefix(next);
    next.computed = next.cachedTokens = blocks.length * PREFIX_BLOCK;
    return { slot: next, positions: next.promptIds.length, blocks };
  }

  /** The prompt's block keys, computed once per request (prefix saves ask after every pass). */
  private prefixKeys(a: ActiveRequest): string[] {
    let keys = this.blockKeys.get(a);
    if (!keys) {
      keys = PrefixCache.blockKeys(a.promptIds, a.req.cacheSalt ?? "");
      this.blockKeys.set(a, keys);
    }
    return keys;
  }

  /** Cached prefix blocks of the prompt (at least one prompt token is always computed). */
  private cachedPrefix(a: ActiveRequest): KvBlock[] {
    // Prompt logprobs need logits for every prompt position, so such requests compute them all.
    if (this.config.prefixCacheBytes <= 0 || needsPromptLogits(a)) return [];
    const keys = this.prefixKeys(a).slice(0, Math.floor((a.promptIds.length - 1) / PREFIX_BLOCK));
    return this.prefixCache.lookup(keys);
  }

  /**
   * A prompt is fully in the cache: its choices (or beams) decode from the next step, the prompt's
   * row forked to each of them. With nothing to generate the request is over.
   */
  promptDone(a: ActiveRequest): void {
    if (a.maxTokens === 0) {
      finish(a, "complete");
      this.leave(a);
      return;
    }
    a.state = "decoding";
    // Beam search: the prompt's row is the root beam (id 0); the others receive copies on the first step.
    const rows: SequenceRow[] = a.beams ? a.beams.openRows(a.promptIds.length) : a.sequences;
    this.forks.push({ from: a, to: rows, length: a.promptIds.length });
  }

  /** Beam search moved rows: the next plan copies them (every source read before any is written). */
  copyRows(copies: StepPlan["beamCopies"]): void {
    this.beamCopies.push(...copies);
  }
}
