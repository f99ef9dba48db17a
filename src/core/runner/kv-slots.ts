/**
 * The batch KV cache: per layer, one K and one V buffer of [rows, kv_heads, positions, head_dim].
 *
 * The same buffer is fed as past_key_values and fetched as present, so the attention writes the
 * new tokens in place. How the buffers get their memory depends on the session:
 *
 * - Reserved (the native session, which binds the cache in place and never copies it): the whole
 *   budget, max rows x max positions, is one allocation made at start. Large allocations are
 *   mapped by the OS and committed page by page on first write, so resident memory follows the
 *   positions rows have actually held, while the shape never changes: no step ever re-lays the
 *   cache out. (Growing it in steps cost a copy of the whole cache every 64 positions: 150 MiB
 *   and ~0.1 s for 4 rows at 1,500 positions, over a second for 16.)
 * - Grown on demand (onnxruntime-node's session, which copies every fetched output into a fresh
 *   ArrayBuffer after each run): the capacity follows the longest live sequence, so the per-step
 *   copy follows it too, not the model's maximum length.
 *
 * Either way memory is given back once far more is held than the live rows use, for a while.
 * Rows are sequences. Batch dimension = leading rows, so rows [0, n) form one contiguous tensor.
 *
 * A sliding-window layer (gemma3's five local layers of six) of a reserved cache is a ring: it holds
 * only its window and a step's new positions beside it (`ringPositions`, a whole number of the
 * attention kernel's 256-position chunks), position p at p % ring (native/src/attention.h), so a
 * long context's cache is mostly its global layers'. Copies, saved blocks and moves read each ring
 * layer's positions where they sit; a saved block must still be in its rings when saved (the
 * prefix cache saves blocks after the pass that completes them, see BatchLayout.savePrefixes).
 */
import { Tensor } from "onnxruntime-node";
import { PREFIX_BLOCK } from "../cache/prefix-cache.ts";
import type { CacheTensors, DecoderSession } from "./decoder-session.ts";
import { type KvArray, KvBlockPool } from "./kv-block-pool.ts";
import type { KvBlock, KvDtype, KvRows, RowMove } from "./kv-rows.ts";

/**
 * Elements one cached position of one KV head takes: the 8-bit cache appends a binary16 scale per
 * block of 32 values (llama.cpp's q8_0), or one for the whole row when head_dim is not a multiple
 * of 32 (native/src/attention.h's CacheRowElements).
 */
export function cacheRowElements(dtype: KvDtype, headDim: number): number {
  if (dtype !== "int8") return headDim;
  return headDim + 2 * (headDim % 32 === 0 ? headDim / 32 : 1);
}

/** The element type a session takes its KV cache in (the native session may keep it in float16 or int8). */
export function kvDtypeOf(session: DecoderSession): KvDtype {
  const past = session.inputType("past_key_values.0.key");
  return past === "float16" || past === "int8" ? past : "float32";
}

/** A saved block in host memory: layer-major positions of one row, in a slot of a block pool. */
class HostKvBlock implements KvBlock {
  readonly data: KvArray;
  readonly length: number;
  private pool: KvBlockPool | undefined;
  constructor(data: KvArray, length: number, pool: KvBlockPool) {
    this.data = data;
    this.length = length;
    this.pool = pool;
  }
  get bytes(): number {
    return this.data.byteLength;
  }
  get released(): boolean {
    return this.pool === undefined;
  }
  release(): void {
    this.pool?.give(this.data);
    this.pool = undefined;
  }
}

/** Grown caches add positions in steps of this many: small, because every run copies the whole fetched cache. */
const GROWTH_STEP = 64;
/** The OS's page: the unit a reserved cache's memory is committed in (4 KiB on x86-64 Linux; a span that starts mid-page may touch one more). */
const PAGE_BYTES = 4096;
/** Rows are added in steps of this many. */
const ROW_STEP = 4;
/**
 * How long the cache must have held more than twice its need before it shrinks. Requests that
 * follow one another (a shared long prefix, a chat's turns) would otherwise pay a re-layout of the
 * whole cache to grow back each time, which costs more than the prefill a prefix hit saves.
 */
export const SHRINK_GRACE_MS = 2000;

/** Feeds (past_key_values.*) and fetches (present.*) over the same memory. */
export type KvBinding = CacheTensors;

export interface KvShape {
  layers: number;
  kvHeads: number;
  headDim: number;
  /** Per layer, its sliding window (positions), 0 or absent for a global layer. */
  windows?: readonly number[];
}

/** The attention kernel's chunk: a ring holds a whole number of them, so none wraps. */
const RING_CHUNK = 256;

/**
 * Positions a sliding-window layer's ring holds: its window, one step's new tokens (all are written
 * before any is attended), and a prefix block, so the blocks a step completes are still whole when
 * saved after it.
 */
export function ringPositions(window: number, stepTokens: number): number {
  return Math.ceil((window + stepTokens + PREFIX_BLOCK) / RING_CHUNK) * RING_CHUNK;
}

export interface KvSlotsOptions {
  /** Most rows the cache may hold (the engine's max_num_seqs). */
  maxRows: number;
  /** Most positions a row may hold (the context limit). */
  maxPositions: number;
  /** Reserve the whole budget up front (see the module comment); otherwise grow on demand. */
  reserve?: boolean;
  /** A grown cache's positions at first (default GROWTH_STEP). */
  initialPositions?: number;
  dtype?: KvDtype;
  /** The clock of the shrink grace period (tests set it). */
  now?: () => number;
  /** Called with each reservation as it is made (the native session keeps huge pages off it). */
  onReserve?: (memory: KvArray) => void;
  /**
   * Most new tokens a row takes in one prompt step (the engine's prefill chunk): with a reserved
   * cache, sliding-window layers become rings of ringPositions(window, stepTokens) positions.
   * Without it every layer holds every position.
   */
  stepTokens?: number;
}

export class KvSlots implements KvRows {
  readonly shape: KvShape;
  /** Most rows the cache may grow to (the engine's max_num_seqs). */
  readonly maxRows: number;
  readonly maxPositions: number;
  /** Whether the budget is reserved up front (it falls back to growing when it cannot be). */
  readonly reserved: boolean;
  /** Rows and positions of the buffers' shape: the budget when reserved, grown on demand otherwise. */
  private rows: number;
  private positions: number;
  /**
   * The extent rows [0, heldRows) x positions [0, heldPositions) that may have been written since
   * the buffers were made: what may be resident. Equal to the shape when grown on demand.
   */
  private heldRows: number;
  private heldPositions: number;
  private buffers: KvArray[];
  readonly dtype: KvDtype;
  /** Elements one position of one KV head takes (head_dim, plus the int8 cache's scale). */
  private readonly width: number;
  private readonly now: () => number;
  private readonly onReserve: ((memory: KvArray) => void) | undefined;
  /** When the cache was first seen holding far more than its need, undefined while it does not. */
  private oversizedSince: number | undefined;
  /** Per layer, the positions its buffers hold at most: a ring's, or Infinity (every position). */
  private readonly rings: number[];
  /** Saved blocks' memory, by block length in positions. */
  private readonly blockPools = new Map<number, KvBlockPool>();
  /** The last rows bound, and over which buffers: reused while nothing changed. */
  private lastBinding:
    | { firstRow: number; count: number; buffers: KvArray[]; positions: number; binding: KvBinding }
    | undefined;

  constructor(shape: KvShape, options: KvSlotsOptions) {
    this.shape = shape;
    this.maxRows = options.maxRows;
    this.maxPositions = options.maxPositions;
    this.dtype = options.dtype ?? "float32";
    this.width = cacheRowElements(this.dtype, shape.headDim);
    this.now = options.now ?? (() => performance.now());
    this.onReserve = options.onReserve;
    this.rows = this.maxRows;
    this.positions = this.maxPositions;
    this.heldRows = 0;
    this.heldPositions = 0;
    this.reserved = options.reserve ?? false;
    const step = options.stepTokens;
    this.rings = Array.from({ length: shape.layers }, (_, l) => {
      const window = shape.windows?.[l] ?? 0;
      if (!this.reserved || !step || window <= 0) return Number.POSITIVE_INFINITY;
      const ring = ringPositions(window, step);
      return ring < this.maxPositions ? ring : Number.POSITIVE_INFINITY;
    });
    try {
      this.buffers = this.reserved ? this.allocate(this.rows, this.positions) : [];
    } catch (err) {
      // A budget larger than the address space or the OS's overcommit allows: grow on demand.
      if (!(err instanceof RangeError)) throw err;
      this.reserved = false;
      this.buffers = [];
    }
    if (!this.reserved) {
      this.rows = Math.min(ROW_STEP, this.maxRows);
      this.positions = Math.min(options.initialPositions ?? GROWTH_STEP, this.maxPositions);
      this.heldRows = this.rows;
      this.heldPositions = this.positions;
      this.buffers = this.allocate(this.rows, this.positions);
    }
  }

  /**
   * One K and one V buffer per layer of [rows, kv_heads, positions, head_dim]. A reserved cache's
   * are views of a single allocation: one mapping the OS commits as it is written (each buffer
   * alone could be small enough for the allocator to take from, and zero, its heap).
   */
  private allocate(rows: number, positions: number): KvArray[] {
    const sizes = Array.from(
      { length: this.shape.layers * 2 },
      (_, b) => rows * this.rowFloats(this.spanOf(b, positions)),
    );
    if (!this.reserved) return sizes.map((n) => this.array(n));
    const all = this.array(sizes.reduce((a, n) => a + n, 0));
    this.onReserve?.(all);
    let at = 0;
    return sizes.map((n) => {
      at += n;
      return all.subarray(at - n, at);
    });
  }

  /** Positions buffer b (layer b >> 1's key or value) holds per row and head, for a shape of `positions`. */
  private spanOf(buffer: number, positions = this.positions): number {
    return Math.min(positions, this.rings[buffer >> 1]!);
  }

  /**
   * Where positions [start, start + length) of buffer b sit in a row's span, as runs of
   * [first slot, count]: in place, or in a ring at position % ring (in two runs where they wrap; a
   * ring's every slot once when asked for more positions than it holds, as a whole row's copy is).
   */
  private slotRuns(buffer: number, start: number, length: number): [number, number][] {
    const ring = this.rings[buffer >> 1]!;
    if (ring === Number.POSITIVE_INFINITY) return [[start, length]];
    if (length >= ring) {
      if (start !== 0)
        throw new Error(`KV cache: positions [${start}, ${start + length}) are not all in a ring of ${ring}`);
      return [[0, ring]];
    }
    const first = start % ring;
    return first + length <= ring
      ? [[first, length]]
      : [
          [first, ring - first],
          [0, length - (ring - first)],
        ];
  }

  /**
   * Positions a row keeps in every layer: the smallest ring's (a sliding-window layer's), or all.
   * A saved block must lie within a row's last `retainedPositions` positions.
   */
  get retainedPositions(): number {
    return Math.min(...this.rings);
  }

  get capacity(): number {
    return this.positions;
  }

  private array(length: number): KvArray {
    if (this.dtype === "int8") return new Int8Array(length);
    return this.dtype === "float16" ? new Uint16Array(length) : new Float32Array(length);
  }

  private get elementBytes(): number {
    return { float32: 4, float16: 2, int8: 1 }[this.dtype];
  }

  /**
   * Bytes the cache may hold resident: the buffers grown on demand; for a reserved one, the pages
   * its written extent touches. The OS commits a reservation page by page, so each (buffer, row,
   * head) span of written positions holds whole pages: one more position that stays within its
   * pages commits nothing.
   */
  get bytes(): number {
    let total = 0;
    for (let b = 0; b < this.buffers.length; b++) {
      const spans = this.heldRows * this.shape.kvHeads;
      const spanBytes = this.spanOf(b, this.heldPositions) * this.width * this.elementBytes;
      total += spans * (this.reserved ? Math.ceil(spanBytes / PAGE_BYTES) * PAGE_BYTES : spanBytes);
    }
    return total;
  }

  /** KV bytes one token occupies across all layers (a position within every ring). */
  get bytesPerToken(): number {
    const { layers, kvHeads } = this.shape;
    return layers * 2 * kvHeads * this.width * this.elementBytes;
  }

  private rowFloats(positions: number): number {
    return this.shape.kvHeads * positions * this.width;
  }

  /**
   * New buffers of [rows, kv_heads, positions, head_dim] holding rows [0, keepRows) x positions
   * [0, keepPositions) of the old ones.
   */
  private relayout(rows: number, positions: number, keepRows: number, keepPositions: number): void {
    const { kvHeads } = this.shape;
    const next = this.allocate(rows, positions);
    this.buffers.forEach((old, b) => {
      const oldSpan = this.spanOf(b) * this.width;
      const newSpan = this.spanOf(b, positions) * this.width;
      const keep = this.spanOf(b, keepPositions) * this.width;
      for (let s = 0; s < keepRows * kvHeads; s++)
        next[b]!.set(old.subarray(s * oldSpan, s * oldSpan + keep) as never, s * newSpan);
    });
    this.buffers = next;
    this.rows = rows;
    this.positions = positions;
  }

  /** Makes room for rows [0, needed) (rows are the outer dimension: growing keeps every offset). */
  ensureRows(needed: number): void {
    if (needed > this.maxRows) throw new Error(`KV cache: ${needed} rows exceed ${this.maxRows}`);
    if (this.reserved) {
      this.heldRows = Math.max(this.heldRows, needed);
      return;
    }
    if (needed <= this.rows) return;
    const rows = Math.min(this.maxRows, Math.ceil(needed / ROW_STEP) * ROW_STEP);
    this.relayout(rows, this.positions, this.rows, this.positions);
    this.heldRows = rows;
  }

  /** Makes room for `needed` positions per row (a grown cache re-lays its buffers out). */
  ensurePositions(needed: number): void {
    if (needed > this.maxPositions)
      throw new Error(`KV cache: ${needed} positions exceed ${this.maxPositions}`);
    if (this.reserved) {
      this.heldPositions = Math.max(this.heldPositions, needed);
      return;
    }
    if (needed <= this.positions) return;
    const positions = Math.min(this.maxPositions, Math.ceil(needed / GROWTH_STEP) * GROWTH_STEP);
    this.relayout(this.rows, positions, this.rows, this.positions);
    this.heldPositions = positions;
  }

  reserve(rows: number, positions: number): void {
    this.ensureRows(rows);
    this.ensurePositions(positions);
  }

  /**
   * Gives memory back once far more is held than the live rows use (rows [0, rows) holding at most
   * `positions` positions), so one long request or a burst of requests does not keep the cache
   * large for good. Twice the need is tolerated, so steady traffic never re-lays out, and so is
   * more for SHRINK_GRACE_MS, so back-to-back requests do not shrink and regrow it each time.
   * A reserved cache keeps its shape: the live rows move to a fresh reservation, and the old one's
   * pages go back to the OS with it.
   */
  shrinkTo(rows: number, positions: number): void {
    const wantRows = Math.max(ROW_STEP, Math.ceil(rows / ROW_STEP) * ROW_STEP);
    const wantPositions = Math.max(GROWTH_STEP, Math.ceil(positions / GROWTH_STEP) * GROWTH_STEP);
    const rowsOver = this.heldRows > 2 * wantRows;
    const positionsOver = this.heldPositions > 2 * wantPositions;
    if (!rowsOver && !positionsOver) {
      this.oversizedSince = undefined;
      return;
    }
    const now = this.now();
    this.oversizedSince ??= now;
    if (now - this.oversizedSince < SHRINK_GRACE_MS) return;
    this.oversizedSince = undefined;
    const keepRows = Math.min(wantRows, this.heldRows, this.maxRows);
    const keepPositions = Math.min(wantPositions, this.heldPositions, this.maxPositions);
    if (this.reserved) {
      this.relayout(this.rows, this.positions, keepRows, keepPositions);
      this.heldRows = keepRows;
      this.heldPositions = keepPositions;
      return;
    }
    const newRows = rowsOver ? Math.min(wantRows, this.maxRows) : this.rows;
    const newPositions = positionsOver ? Math.min(wantPositions, this.maxPositions) : this.positions;
    this.relayout(
      newRows,
      newPositions,
      Math.min(newRows, this.rows),
      Math.min(newPositions, this.positions),
    );
    this.heldRows = newRows;
    this.heldPositions = newPositions;
  }

  /** Copies the first `length` positions of row `from` into row `to` (forks, compaction, prefix hits). */
  copyRow(from: number, to: number, length: number): void {
    if (from === to || length === 0) return;
    this.ensureRows(Math.max(from, to) + 1);
    const { kvHeads } = this.shape;
    this.buffers.forEach((buf, b) => {
      const span = this.spanOf(b) * this.width;
      // A ring's slots are the same positions in every row: its first min(length, ring) slots.
      const n = this.spanOf(b, length) * this.width;
      for (let h = 0; h < kvHeads; h++) {
        const src = (from * kvHeads + h) * span;
        buf.copyWithin((to * kvHeads + h) * span, src, src + n);
      }
    });
  }

  moveRows(moves: readonly RowMove[]): void {
    const saved = moves.map((m) => (m.from === m.to ? undefined : this.readPositions(m.from, 0, m.length)));
    moves.forEach((m, i) => {
      if (saved[i]) this.writePositions(m.to, 0, m.length, saved[i]!);
    });
  }

  saveBlock(row: number, start: number, length: number): KvBlock {
    const elements = this.buffers.length * this.shape.kvHeads * length * this.width;
    let pool = this.blockPools.get(length);
    if (!pool) {
      pool = new KvBlockPool(elements, this.elementBytes, (n) => this.array(n));
      this.blockPools.set(length, pool);
    }
    return new HostKvBlock(this.readPositions(row, start, length, pool.take()), length, pool);
  }

  loadBlock(block: KvBlock, row: number, start: number): void {
    if (!(block instanceof HostKvBlock)) throw new Error("KV block from another cache");
    if (block.released) throw new Error("KV block used after its release");
    this.writePositions(row, start, block.length, block.data);
  }

  /** Reads positions [start, start+length) of a row, layer-major. */
  private readPositions(row: number, start: number, length: number, out?: KvArray): KvArray {
    const { kvHeads } = this.shape;
    const width = this.width;
    const runs = this.buffers.map((_, b) => this.slotRuns(b, start, length));
    out ??= this.array(
      runs.reduce((n, r) => n + r.reduce((m, [, count]) => m + count, 0), 0) * kvHeads * width,
    );
    let at = 0;
    this.buffers.forEach((buf, b) => {
      const span = this.spanOf(b) * width;
      for (let h = 0; h < kvHeads; h++)
        for (const [slot, count] of runs[b]!) {
          const src = (row * kvHeads + h) * span + slot * width;
          out!.set(buf.subarray(src, src + count * width) as never, at);
          at += count * width;
        }
    });
    return out;
  }

  /** Inverse of readPositions. */
  private writePositions(row: number, start: number, length: number, data: KvArray): void {
    this.ensureRows(row + 1);
    this.ensurePositions(start + length);
    const { kvHeads } = this.shape;
    const width = this.width;
    let at = 0;
    this.buffers.forEach((buf, b) => {
      const span = this.spanOf(b) * width;
      const runs = this.slotRuns(b, start, length);
      for (let h = 0; h < kvHeads; h++)
        for (const [slot, count] of runs) {
          buf.set(data.subarray(at, at + count * width) as never, (row * kvHeads + h) * span + slot * width);
          at += count * width;
        }
    });
  }

  /**
   * Feeds and fetches for rows [firstRow, firstRow + count): the same memory as past input and as
   * present output.
   */
  bind(firstRow: number, count: number): KvBinding {
    this.ensureRows(firstRow + count);
    // Decode steps bind the same rows step after step: the tensors are reused until the rows or
    // the buffers change (2 per layer, each a view object ONNX Runtime's Tensor validates).
    const last = this.lastBinding;
    if (
      last &&
      last.firstRow === firstRow &&
      last.count === count &&
      last.buffers === this.buffers &&
      last.positions === this.positions
    )
      return last.binding;
    const { layers, kvHeads } = this.shape;
    const feeds: Record<string, Tensor> = {};
    const fetches: Record<string, Tensor> = {};
    for (let l = 0; l < layers; l++)
      for (const [j, kind] of (["key", "value"] as const).entries()) {
        const span = this.spanOf(2 * l + j);
        const rowFloats = this.rowFloats(span);
        const dims = [count, kvHeads, span, this.width];
        const view = this.buffers[2 * l + j]!.subarray(firstRow * rowFloats, (firstRow + count) * rowFloats);
        feeds[`past_key_values.${l}.${kind}`] = new Tensor(this.dtype, view as never, dims);
        fetches[`present.${l}.${kind}`] = new Tensor(this.dtype, view as never, dims);
      }
    const binding = { feeds, fetches };
    this.lastBinding = { firstRow, count, buffers: this.buffers, positions: this.positions, binding };
    return binding;
  }
}
