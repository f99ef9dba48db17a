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
