/**
 * The TokenConstraint of one sequence: an XGrammar GrammarMatcher that fills the allowed-token
 * bitmask before each sample and advances by the sampled token. Stop tokens are allowed only where
 * the grammar accepts; the matcher terminates once one is accepted.
 */
import type { TokenConstraint } from "../step/constrain.ts";
import type { GrammarMatcher } from "./xgrammar-module.ts";

// A matcher lives in WebAssembly memory: freed when its sequence ends, or when the wrapper is
// collected (an aborted request).
const matchers = new FinalizationRegistry<GrammarMatcher>((m) => m.dispose());

export class GrammarConstraint implements TokenConstraint {
  private matcher: GrammarMatcher | undefined;
  /** A token the grammar refused was appended (only possible past the mask): output is invalid. */
  rejected = false;

  constructor(matcher: GrammarMatcher) {
    this.matcher = matcher;
    matchers.register(this, matcher, this);
  }

  async fillMask(mask: Uint32Array): Promise<void> {
    if (!this.matcher) return;
    const bits = await this.matcher.getNextTokenBitmask();
    mask.set(new Uint32Array(bits.buffer, bits.byteOffset, Math.min(bits.length, mask.length)));
  }

  accept(tokenId: number): boolean {
    if (!this.matcher || this.matcher.acceptToken(tokenId)) return true;
    this.rejected = true;
    return false;
  }

  /**
   * Jump-forward: where the grammar leaves a single continuation, its tokens (`encode` of the
   * forced text), already accepted by the matcher. The forced text's last token is left to
   * sampling, so the model may still take a token that runs past the forced text (` 3` after a
   * forced ` `, as it would tokenize the whole). Nothing is taken when fewer than `minimum`
   * tokens would be; at most `limit` are.
   */
  forcedTokens(encode: (text: string) => number[], minimum: number, limit: number): number[] {
    if (!this.matcher || limit < minimum) return [];
    const text = this.matcher.findJumpForwardString();
    if (text === "") return [];
    const ids = encode(text).slice(0, -1).slice(0, limit);
    if (ids.length < minimum) return [];
    let accepted = 0;
    while (accepted < ids.length && this.matcher.acceptToken(ids[accepted]!)) accepted++;
    if (accepted >= minimum) return ids.slice(0, accepted);
    // A tokenization the grammar does not take (it reads bytes, the tokenizer may merge across
    // what it forces): give back what was taken and let sampling go on.
    if (accepted > 0) this.matcher.rollBack(accepted);
    return [];
  }

  reset(): void {
    this.matcher?.reset();
    this.rejected = false;
  }

  get terminated(): boolean {
    return this.matcher?.isTerminated() ?? true;
  }

  release(): void {
    if (!this.matcher) return;
    matchers.unregister(this);
    this.matcher.dispose();
    this.matcher = undefined;
  }
}
