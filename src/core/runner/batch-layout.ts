/**
 * The batch's KV rows: which row each slot holds (a slot is a prompt being prefilled, a choice or
 * a beam: any object the plan names), and every change to the cache's layout. It is the only
 * caller of KvRows. The runner applies a step's plan here just before the step's pass:
 *
 *   1. forks            a complete prompt's row passes to its first choice (or beam); the others
 *                       copy it into rows after the last
 *   2. beam copies      each live beam's row takes its parent's positions (parents read first:
 *                       a parent may be leaving the batch)
 *   3. compaction       slots the plan does not run leave (a finished choice, a prompt aborted
 *                       mid-prefill, from any row); the last decoding rows fill the decoding
 *                       part's gaps, the prompts follow in their order; memory far beyond the need
 *                       is given back
 *   4. admission        each new prompt gets the row after the others, room for its whole prompt
 *                       and its cached prefix blocks
 *   5. the pass         each run's row; after it, complete prompts' blocks go to the prefix cache
 *
 * Architecture invariant: rows [0, decoding) hold the slots that decode (one contiguous batch
 * tensor for a decode pass), prompt slots follow; after a plan is applied, rows [0, runs) are
 * exactly the plan's runs. The scheduler decides what runs; only this module knows where.
 */
import { PREFIX_BLOCK, type PrefixCache } from "../cache/prefix-cache.ts";
import type { KvBlock, KvRows, RowMove } from "./kv-rows.ts";

/** Whatever stands for one KV row's owner: compared by identity only. */
export type Slot = object;

/** What the runner computes for one slot this step. */
export interface PassRun {
  slot: Slot;
  /** Positions the slot's row holds: the run's tokens go after them. */
  start: number;
  tokens: readonly number[];
  /** Logits kept: the last token's, every token's (prompt logprobs), or none (a prompt's inner chunk). */
  logits: "last" | "all" | "none";
  /** A prompt chunk (its row follows the decoding rows), not a decoding row's new tokens. */
  prompt: boolean;
}

/** The KV work of a step's plan (StepPlan in src/core/step/plan.ts carries it, with more). */
export interface LayoutPlan {
  runs: readonly PassRun[];
  /** Prompts admitted this step: a row each, room for `positions`, and their cached prefix blocks from position 0. */
  admitted: readonly { slot: Slot; positions: number; blocks: readonly KvBlock[] }[];
  /** Prompts complete since the last step: their row becomes `to[0]`'s and is copied to the others (applied first). */
  forks: readonly { from: Slot; to: readonly Slot[]; length: number }[];
  /** Beam search's row moves of the last step: every source is read before any row is written. */
  beamCopies: readonly { from: Slot; to: Slot; length: number }[];
  /** Prompts this step completes: after the pass, their blocks (keyed in order) go to the prefix cache. */
  prefixSaves: readonly { slot: Slot; keys: readonly string[] }[];
}

export class BatchLayout {
  private readonly kv: KvRows;
  private readonly prefixCache: PrefixCache | undefined;
  /** Slots in row order: after a plan is applied, decoding ones first, then prompts. */
  private readonly rows: Slot[] = [];
  /** Slots admitted as prompts and not forked yet: they hold the rows after the decoding ones. */
  private readonly prompts = new Set<Slot>();
  /** Positions each slot's row holds (as of its last pass). */
  private readonly held = new Map<Slot, number>();

  constructor(kv: KvRows, prefixCache?: PrefixCache) {
    this.kv = kv;
    this.prefixCache = prefixCache;
  }

  /** The row of each run, in the plan's order, once the plan's layout changes are made. */
  apply(plan: LayoutPlan): number[] {
    for (const f of plan.forks) this.fork(f.from, f.to, f.length);
    this.copyBeams(plan.beamCopies);
    this.compact(plan.runs);
    for (const a of plan.admitted) this.admit(a.slot, a.positions, a.blocks);
    const index = new Map(this.rows.map((s, r) => [s, r]));
    return plan.runs.map((run) => {
      const row = index.get(run.slot);
      if (row === undefined) throw new Error("a planned run's slot holds no KV row");
      this.held.set(run.slot, run.start + run.tokens.length);
      return row;
    });
  }

  /**
   * After the pass: the blocks prompts have complete that the prefix cache does not hold yet. A
   * block a sliding-window layer's ring no longer holds whole is not saved (the scheduler asks
   * after every pass, so with rings sized by ringPositions none is lost).
   */
  savePrefixes(plan: LayoutPlan): void {
    const cache = this.prefixCache;
    if (!cache) return;
    for (const { slot, keys } of plan.prefixSaves) {
      const row = this.rows.indexOf(slot);
      const oldest = (this.held.get(slot) ?? 0) - this.kv.retainedPositions;
      keys.forEach((key, i) => {
        if (i * PREFIX_BLOCK >= oldest && !cache.has(key))
          cache.insert(key, this.kv.saveBlock(row, i * PREFIX_BLOCK, PREFIX_BLOCK));
      });
    }
  }

  /** Forgets every slot (after a failed pass the cache is in an unknown state). */
  clear(): void {
    this.rows.length = 0;
    this.prompts.clear();
    this.held.clear();
  }

  private copyBeams(copies: LayoutPlan["beamCopies"]): void {
    if (copies.length === 0) return;
    const rowOf = (s: Slot) => {
      const r = this.rows.indexOf(s);
      if (r < 0) throw new Error("a beam copy names a slot with no KV row");
      return r;
    };
    this.kv.moveRows(copies.map((c) => ({ from: rowOf(c.from), to: rowOf(c.to), length: c.length })));
    for (const c of copies) this.held.set(c.to, c.length);
  }

  /**
   * A prompt's row becomes its first choice's; the others take rows after every other row, each a
   * copy of it. The prompt may sit between other prompts: compaction moves rows into place.
   */
  private fork(from: Slot, to: readonly Slot[], length: number): void {
    const row = this.rows.indexOf(from);
    if (row < 0) throw new Error("a fork names a slot with no KV row");
    this.held.delete(from);
    this.prompts.delete(from);
    const [first, ...others] = to;
    if (first === undefined) return;
    this.rows[row] = first;
    this.held.set(first, length);
    for (const slot of others) {
      this.kv.copyRow(row, this.rows.length, length);
      this.rows.push(slot);
      this.held.set(slot, length);
    }
  }

  /**
   * Slots not in this step's runs leave; the live ones end up in rows [0, runs), decoding ones
   * first. A slot already in its part stays; the decoding part's gaps are filled from its highest
   * rows down (the last decoding row fills the highest gap), and the prompts keep their order.
   */
  private compact(runs: readonly PassRun[]): void {
    const live = new Set(runs.map((r) => r.slot));
    for (const slot of this.rows)
      if (!live.has(slot)) {
        this.held.delete(slot);
        this.prompts.delete(slot);
      }
    const decodingCount = this.rows.filter((s) => live.has(s) && !this.prompts.has(s)).length;
    const target: (Slot | undefined)[] = this.rows.map((s, r) =>
      r < decodingCount && live.has(s) && !this.prompts.has(s) ? s : undefined,
    );
    target.length = decodingCount;
    // Decoding slots beyond their part, highest row first, into the gaps, highest gap first.
    const strays = this.rows.filter((s, r) => r >= decodingCount && live.has(s) && !this.prompts.has(s));
    for (let r = decodingCount - 1; r >= 0; r--) if (target[r] === undefined) target[r] = strays.pop();
    target.push(...this.rows.filter((s) => live.has(s) && this.prompts.has(s)));
    const moves: RowMove[] = [];
    target.forEach((slot, to) => {
      const from = this.rows.indexOf(slot!);
      if (from !== to) moves.push({ from, to, length: this.held.get(slot!) ?? 0 });
    });
    this.move(moves);
    this.rows.length = 0;
    this.rows.push(...(target as Slot[]));
    // One long request or a burst must not keep the cache (and every step's tensors) large for good.
    let positions = 0;
    for (const slot of this.rows) positions = Math.max(positions, this.held.get(slot) ?? 0);
    this.kv.shrinkTo(this.rows.length, positions);
  }

  /**
   * Row moves in place: each copy runs once no pending move still reads its destination; a cycle
   * (a fork's choice and a prompt after it trading rows) is copied through KvRows.moveRows, which
   * reads every source first.
   */
  private move(moves: RowMove[]): void {
    let pending = moves;
    for (;;) {
      const reads = new Set(pending.map((m) => m.from));
      const ready = pending.filter((m) => !reads.has(m.to));
      if (ready.length === 0) break;
      for (const m of ready) this.kv.copyRow(m.from, m.to, m.length);
      pending = pending.filter((m) => reads.has(m.to));
    }
    if (pending.length > 0) this.kv.moveRows(pending);
  }

  /** Room for the whole prompt at once: growing chunk by chunk would re-lay the cache out each time. */
  private admit(slot: Slot, positions: number, blocks: readonly KvBlock[]): void {
    const row = this.rows.length;
    this.rows.push(slot);
    this.prompts.add(slot);
    this.kv.reserve(row + 1, positions);
    blocks.forEach((block, i) => {
      this.kv.loadBlock(block, row, i * PREFIX_BLOCK);
    });
    this.held.set(slot, blocks.length * PREFIX_BLOCK);
  }
}
