/**
 * The constrain stage: between the forward pass and sampling, every sequence with a token
 * constraint fills its row of an allowed-token bitmask (bit i set = token i may be sampled), as
 * vLLM's structured-output manager fills the grammar bitmask between execute_model and
 * sample_tokens. The sampler applies the mask before anything else (raw logprobs included).
 * Structured outputs plug in by implementing TokenConstraint; sequences without one are unmasked.
 */

export interface TokenConstraint {
  /** Sets the bits of the tokens allowed next; `mask` arrives cleared. */
  fillMask(mask: Uint32Array): void;
  /** Advances past the token that was sampled. */
  accept(tokenId: number): void;
}

/** 32-bit words in one sequence's mask. */
export function maskWords(vocabSize: number): number {
  return Math.ceil(vocabSize / 32);
}

/** Reusable mask rows, so a step allocates nothing. */
export class MaskRows {
  private readonly words: number;
  private readonly rows: Uint32Array[] = [];

  constructor(vocabSize: number) {
    this.words = maskWords(vocabSize);
  }

  /** One mask per sequence, in order; undefined for sequences without a constraint. */
  build(sequences: readonly { readonly constraint?: TokenConstraint }[]): (Uint32Array | undefined)[] {
    let used = 0;
    return sequences.map((s) => {
      if (!s.constraint) return undefined;
      if (used === this.rows.length) this.rows.push(new Uint32Array(this.words));
      const row = this.rows[used++]!;
      row.fill(0);
      s.constraint.fillMask(row);
      return row;
    });
  }
}
