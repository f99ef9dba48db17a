/**
 * A thinking budget as a token constraint: while the budget forces the think block's close, the
 * mask allows the forced token alone; otherwise it is the request's own constraint (structured
 * outputs) or every token. The request's constraint is never bypassed: a forced token it refuses
 * is not forced (the model goes on as the grammar lets it), so the answer stays inside the grammar.
 */
import type { TokenConstraint } from "./constrain.ts";
import type { ThinkBlock } from "./think-block.ts";

export class ThinkBudgetConstraint implements TokenConstraint {
  private readonly block: ThinkBlock;
  private readonly inner?: TokenConstraint;
  private readonly vocabSize: number;

  constructor(block: ThinkBlock, vocabSize: number, inner?: TokenConstraint) {
    this.block = block;
    this.vocabSize = vocabSize;
    this.inner = inner;
  }

  get terminated(): boolean | undefined {
    return this.inner?.terminated;
  }

  async fillMask(mask: Uint32Array): Promise<void> {
    if (this.inner) await this.inner.fillMask(mask);
    const forced = this.block.forcedNext();
    if (forced !== undefined) {
      const word = forced >>> 5;
      const bit = 1 << (forced & 31);
      const allowed = !this.inner || (mask[word]! & bit) !== 0;
      if (allowed) {
        mask.fill(0);
        mask[word] = bit;
        return;
      }
      this.block.abandonForcing();
    }
    if (!this.inner) allowAll(mask, this.vocabSize);
  }

  accept(tokenId: number): boolean {
    return this.inner ? this.inner.accept(tokenId) : true;
  }

  release(): void {
    this.inner?.release?.();
  }

  /** The inner constraint's jump-forward, once the block is closed (inside it the budget decides). */
  forcedTokens(encode: (text: string) => number[], minimum: number, limit: number): number[] {
    if (!this.inner?.forcedTokens || this.block.phase !== "answer" || this.block.forcedNext() !== undefined)
      return [];
    return this.inner.forcedTokens(encode, minimum, limit);
  }

  reset(): void {
    this.inner?.reset?.();
  }
}

/** Sets the bits of every token of the vocabulary. */
function allowAll(mask: Uint32Array, vocabSize: number): void {
  const full = vocabSize >>> 5;
  mask.fill(0xffffffff, 0, full);
  const rest = vocabSize & 31;
  if (rest > 0) mask[full] = (1 << rest) - 1;
}
