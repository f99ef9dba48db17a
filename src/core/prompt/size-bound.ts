/**
 * The most bytes of text one token can stand for, from the vocabulary: a text of B bytes has at
 * least B / maxBytesPerToken tokens, so a prompt whose bytes alone exceed what the context holds
 * is refused before it is tokenized. Undefined where the tokenizer normalizes text (a normalizer
 * may shrink it, so its bytes bound nothing).
 */
import { tokenBytes } from "../output/token-text.ts";
import type { TokenizerLike } from "../output/tokenizer-like.ts";

const utf8 = new TextEncoder();

export function maxBytesPerToken(tokenizer: TokenizerLike, normalizes: boolean): number | undefined {
  if (normalizes) return undefined;
  let most = 1;
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    let bytes = tokenBytes(tokenizer, id).length;
    // Outside byte-level vocabularies a token's spelling may stand for more input than it decodes to.
    if (tokenizer.byteEncoding !== "byte-level")
      bytes = Math.max(bytes, utf8.encode(tokenizer.idToToken(id) ?? "").length);
    if (bytes > most) most = bytes;
  }
  return most;
}
