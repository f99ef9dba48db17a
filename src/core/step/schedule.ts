/**
 * The schedule stage and the batch's row layout. Each step: aborted requests leave, the next
 * waiting request is admitted when rows are free and no other prompt is mid-prefill (its cached
 * prefix blocks are loaded into its row), and the plan names the decoding rows and the prompt
 * chunk to run.
 *
 * KV rows: rows [0, decoding) decode together (one contiguous batch tensor); the prompt being
 * prefilled sits at row `decoding`, its extra choices (n > 1) are forked from it once the prompt
 * is in the cache. A finished row is filled by moving the last decoding row into it.
 */
import { PREFIX_BLOCK, PrefixCache } from "../cache/prefix-cache.ts";
import type { KvRows } from "../runner/kv-rows.ts";
import { FairShareQueue } from "../scheduler/fair-share.ts";
import { RequestQueue } from "../scheduler/request-queue.ts";
import type { EngineCoreConfig } from "../types.ts";
import type { ActiveRequest, Row } from "./active-request.ts";
import { BeamRow } from "./beam-group.ts";

export interface PrefillChunk {
  request: ActiveRequest;
  /** Prompt positions already cached: the chunk starts here. */
  start: number;
  tokens: number[];
}

export interface StepPlan {
  /** Rows [0, decode.length), one new token each. */
  decode: readonly Row[];
  prefill?: PrefillChunk;
}

export class Scheduler {
  private readonly config: EngineCoreConfig;
  private readonly kv: KvRows;
  private readonly prefixCache: PrefixCache;
  private readonly waiting: RequestQueue<ActiveRequest> | FairShareQueue<ActiveRequest>;
  /** Decoding rows, in row order. */
  readonly decoding: Row[] = [];
  private prefilling: ActiveRequest | undefined;
  /** Told of each aborted request as it leaves (queue, prefill or batch), once. */
  onDropped: (a: ActiveRequest) => void = () => {};

  constructor(config: EngineCoreConfig, kv: KvRows) {
    this.config = config;
    this.kv = kv;
    this.prefixCache = new PrefixCache(config.prefixCacheBytes);
    this.waiting = config.fairShare
      ? new FairShareQueue(config.schedulingPolicy)
      : new RequestQueue(config.schedulingPolicy);
  }

  /**
   * The row of the prompt being prefilled: just after the decoding rows, so it moves down when a
   * decoding row leaves (compact), and a chunk must be run at its row as of the pass, not as of
   * schedule().
   */
  get prefillRow(): number {
    return this.decoding.length;
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

  get runningCount(): number {
    return this.decoding.length + (this.prefilling ? 1 : 0);
  }

  /** Positions held by running sequences (decoding rows and the prompt mid-prefill). */
  get usedPositions(): number {
    return this.decoding.reduce((s, d) => s + d.seq.length, this.prefilling?.computed ?? 0);
  }

  get prefixCacheBytes(): number {
    return this.prefixCache.usedBytes;
  }

  add(a: ActiveRequest): void {
    this.waiting.push(a);
  }

  hasWork(): boolean {
    return this.waiting.length > 0 || this.decoding.length > 0 || this.prefilling !== undefined;
  }

  /** Aborted requests leave, the next waiting one may start; returns what runs this step. */
  schedule(): StepPlan {
    this.dropAborted();
    this.admitNext();
    const a = this.prefilling;
    if (!a) return { decode: [...this.decoding] };
    const start = a.computed;
    const tokens = a.promptIds.slice(start, start + this.config.prefillChunk);
    return { decode: [...this.decoding], prefill: { request: a, start, tokens } };
  }

  /** Every request in flight (decoding or mid-prefill), each once. */
  inFlight(): Set<ActiveRequest> {
    const owners = new Set<ActiveRequest>(this.decoding.map((d) => d.owner));
    if (this.prefilling) owners.add(this.prefilling);
    return owners;
  }

  /** Forgets every running request (after a failed forward pass the cache is in an unknown state). */
  clearRunning(): void {
    this.decoding.length = 0;
    this.prefilling = undefined;
  }

  private dropAborted(): void {
    const dropped = new Set<ActiveRequest>();
    for (const w of [...this.waiting])
      if (w.aborted) {
        this.waiting.remove(w);
        dropped.add(w);
      }
    for (let r = this.decoding.length - 1; r >= 0; r--) {
      const d = this.decoding[r]!;
      if (!d.owner.aborted) continue;
      dropped.add(d.owner);
      if (d.seq instanceof BeamRow) {
        // An aborted beam search ends as a whole once its last row is gone.
        d.seq.finished = true;
        this.removeRow(r);
        if (!this.decoding.some((x) => x.owner === d.owner)) {
          d.seq.group.release();
          d.owner.emit({ type: "done" });
        }
        continue;
      }
      if (!d.seq.finished) {
        d.owner.emit(d.seq.finishEvent("abort", null));
        choiceFinished(d.owner);
      }
      this.removeRow(r);
    }
    if (this.prefilling?.aborted) {
      dropped.add(this.prefilling);
      this.prefilling = undefined;
    }
    for (const a of dropped) this.onDropped(a);
  }

  private admitNext(): void {
    if (this.prefilling) return;
    const next = this.waiting.peek();
    if (!next || this.decoding.length + next.req.n > this.config.maxNumSeqs) return;
    this.waiting.shift();
    next.queueMs = performance.now() - next.queuedAt;
    this.prefilling = next;
    // Room for the whole prompt at once: growing chunk by chunk (or block by block for a prefix
    // hit) would re-lay the whole cache out each time.
    this.kv.reserve(this.decoding.length + 1, next.promptIds.length);
    this.loadCachedPrefix(next);
  }

  private prefixKeys(a: ActiveRequest): string[] {
    return PrefixCache.blockKeys(a.promptIds, a.req.cacheSalt ?? "");
  }

  /** Copies cached prefix blocks into the request's row (at least one prompt token is always computed). */
  private loadCachedPrefix(a: ActiveRequest): void {
    // Prompt logprobs need logits for every prompt position, so such requests compute them all.
    if (this.config.prefixCacheBytes <= 0 || a.req.promptLogprobs !== undefined || a.req.promptLogits) return;
    const keys = this.prefixKeys(a).slice(0, Math.floor((a.promptIds.length - 1) / PREFIX_BLOCK));
    const blocks = this.prefixCache.lookup(keys);
    const row = this.decoding.length;
    blocks.forEach((block, i) => {
      this.kv.loadBlock(block, row, i * PREFIX_BLOCK);
    });
    a.computed = a.cachedTokens = blocks.length * PREFIX_BLOCK;
  }

  /**
   * A prompt is fully in the cache: stores its blocks in the prefix cache and moves its choices
   * (or beams) into decoding rows, forking the prompt's row for the others.
   */
  promptDone(a: ActiveRequest): void {
    const row = this.decoding.length;
    this.prefilling = undefined;
    if (this.config.prefixCacheBytes > 0)
      this.prefixKeys(a).forEach((key, i) => {
        if (!this.prefixCache.has(key))
          this.prefixCache.insert(key, this.kv.saveBlock(row, i * PREFIX_BLOCK, PREFIX_BLOCK));
      });
    if (a.beams) {
      // The prompt's row is the root beam (id 0); the others receive copies on the first step.
      a.beams.rows = Array.from(
        { length: a.req.n },
        (_, i) => new BeamRow(a.beams!, i === 0 ? 0 : -1, a.promptIds.length, -1, a.beams!.constraints?.[i]),
      );
      for (const seq of a.beams.rows) this.decoding.push({ seq, owner: a });
      return;
    }
    a.sequences.forEach((seq, i) => {
      if (i > 0) this.kv.copyRow(row, row + i, a.promptIds.length);
      this.decoding.push({ seq, owner: a });
    });
  }

  /** The decoding row a beam occupies. */
  rowOf(beam: BeamRow): number {
    return this.decoding.findIndex((d) => d.seq === beam);
  }

  /** Removes finished rows, moving the last decoding row (and the prefilling row) down into the gaps. */
  compact(): void {
    for (let r = this.decoding.length - 1; r >= 0; r--) if (this.decoding[r]!.seq.finished) this.removeRow(r);
    // One long request or a burst must not keep the cache (and every step's tensors) large for good.
    const rows = this.decoding.length + (this.prefilling ? 1 : 0);
    let positions = this.prefilling?.computed ?? 0;
    for (const d of this.decoding) positions = Math.max(positions, d.seq.length);
    this.kv.shrinkTo(rows, positions);
  }

  private removeRow(row: number): void {
    const last = this.decoding.length - 1;
    if (row !== last) {
      this.kv.copyRow(last, row, this.decoding[last]!.seq.length);
      this.decoding[row] = this.decoding[last]!;
    }
    this.decoding.pop();
    // The prompt being prefilled lives just after the decoding rows: keep it adjacent.
    if (this.prefilling && this.prefilling.computed > 0)
      this.kv.copyRow(last + 1, last, this.prefilling.computed);
  }
}

/** Counts a finished choice; the request is done when all its choices are. */
export function choiceFinished(a: ActiveRequest): void {
  a.finishedChoices++;
  if (a.finishedChoices === a.req.n) a.emit({ type: "done" });
}
