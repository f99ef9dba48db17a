/**
 * What the engine sees of the KV cache: rows (one per sequence, addressed by index) and saved
 * blocks it cannot look into. Where the tensors live (host Float32Arrays today, device memory
 * under another execution provider) stays behind this interface.
 */

/**
 * The cache's element type: float32; float16 (IEEE binary16 bits in a Uint16Array); or int8, a
 * cached position of a KV head being head_dim signed bytes and then one binary16 scale per block
 * of 32 (native/src/attention.h), so a position takes head_dim + head_dim / 16 elements.
 */
/** The element types a KV cache can be kept in. */
export const KV_DTYPES = ["float32", "float16", "int8"] as const;
export type KvDtype = (typeof KV_DTYPES)[number];

/** A saved run of positions of one row (for the prefix cache); opaque to the engine. */
export interface KvBlock {
  readonly bytes: number;
  /** Gives the block's memory back for reuse (the prefix cache, on eviction); it must not be loaded again. */
  release(): void;
}

export interface RowMove {
  from: number;
  to: number;
  /** Positions copied from the start of the row. */
  length: number;
}

export interface KvRows {
  /** Bytes held by the cache now. */
  readonly bytes: number;
  /** Bytes one cached token occupies across all layers. */
  readonly bytesPerToken: number;
  /** The element type the cache holds its values in. */
  readonly dtype: KvDtype;
  /**
   * Positions a row keeps in every layer (a sliding-window layer's ring holds its last ones;
   * Infinity: all). A block can be saved only from a row's last `retainedPositions` positions.
   */
  readonly retainedPositions: number;
  /** Copies the first `length` positions of row `from` into row `to` (forks, compaction). */
  copyRow(from: number, to: number, length: number): void;
  /** Several copies at once: every source is read before any destination is written (beam forks). */
  moveRows(moves: readonly RowMove[]): void;
  /** Saves positions [start, start + length) of a row. */
  saveBlock(row: number, start: number, length: number): KvBlock;
  /** Makes room for rows [0, rows) × `positions` at once (one re-layout instead of one per block). */
  reserve(rows: number, positions: number): void;
  /** Writes a saved block back at `start` of a row. */
  loadBlock(block: KvBlock, row: number, start: number): void;
  /** Live data fits in rows [0, rows) × `positions`: memory held far beyond that may be given back. */
  shrinkTo(rows: number, positions: number): void;
}
