/**
 * The attention_mask feed, kept across forward passes. A decode step's mask is [rows, capacity]
 * int64 (ones over each row's positions, zeros after): 16 rows of a 2,048-position cache are
 * 256 KiB, and a new array each step made V8 run a full mark-compact on the engine's thread about
 * once a second, on the step's critical path. Here one buffer is kept and only the positions a
 * row gained or lost since the last pass are written, and the same Tensor object is handed out
 * while the shape stays, so the native session's kept binding need not bind it again.
 */
import { Tensor } from "onnxruntime-node";

export class AttentionMask {
  private data = new BigInt64Array(0);
  private width = 0;
  private capacityRows = 0;
  /** Ones written at the start of each buffer row. */
  private filled: number[] = [];
  private tensor: Tensor | undefined;

  /** The mask for rows of these valid lengths over `width` positions (valid until the next call). */
  rows(validLengths: readonly number[], width: number): Tensor {
    const rows = validLengths.length;
    if (width !== this.width || rows > this.capacityRows) this.reset(rows, width);
    for (let r = 0; r < rows; r++) {
      const want = validLengths[r]!;
      const have = this.filled[r]!;
      if (want > have) this.data.fill(1n, r * width + have, r * width + want);
      else if (want < have) this.data.fill(0n, r * width + want, r * width + have);
      this.filled[r] = want;
    }
    if (this.tensor?.dims[0] !== rows)
      this.tensor = new Tensor("int64", this.data.subarray(0, rows * width), [rows, width]);
    return this.tensor;
  }

  private reset(rows: number, width: number): void {
    // A batch growing a row at a time reallocates only when it doubles.
    this.capacityRows = Math.max(rows, 2 * this.capacityRows);
    this.data = new BigInt64Array(this.capacityRows * width);
    this.width = width;
    this.filled = new Array(this.capacityRows).fill(0);
    this.tensor = undefined;
  }
}
