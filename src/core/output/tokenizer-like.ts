/**
 * The slice of a tokenizer that turning generated ids into text needs. Kept
 * small so the output stage can be tested with a hand-made vocabulary and so
 * nothing here depends on transformers.js (see `transformers-adapter.ts`).
 */

export interface DecodeOptions {
  /** Drop added tokens flagged `special` (HF `skip_special_tokens`). */
  skipSpecialTokens: boolean;
  /**
   * HF Python's `clean_up_tokenization_spaces` (" ." → "." and friends). The
   * streaming decoder never applies it: HF tokenizers' Rust `decode` has no
   * such step, and that is what vLLM streams with.
   */
  cleanUpTokenizationSpaces?: boolean;
}

/**
 * How the vocabulary spells bytes that are not whole characters:
 * - "byte-level": every token is written in GPT-2's byte alphabet (ByteLevel decoder);
 * - "byte-fallback": SentencePiece-style `<0xNN>` tokens for single bytes;
 * - "none": tokens are plain text.
 */
export type ByteEncoding = "byte-level" | "byte-fallback" | "none";

export interface TokenizerLike {
  /** Number of ids the tokenizer knows: base vocabulary plus added tokens. */
  readonly vocabSize: number;
  /**
   * Text of `ids` as HF tokenizers' `decode` gives it: ids outside the
   * vocabulary contribute nothing, an empty list gives "".
   */
  decode(ids: readonly number[], options: DecodeOptions): string;
  /** The vocabulary string of `id` (`convert_ids_to_tokens`), undefined outside the vocabulary. */
  idToToken(id: number): string | undefined;
  /** Content of every added token, special or not, by id (HF `added_tokens_decoder`). */
  readonly addedTokens: ReadonlyMap<number, string>;
  /** Ids of the added tokens flagged `special`: what `skipSpecialTokens` drops. */
  readonly specialIds: ReadonlySet<number>;
  readonly byteEncoding: ByteEncoding;
  /** The tokenizer's own `clean_up_tokenization_spaces`, which HF Python's `decode` applies. */
  readonly cleanUpTokenizationSpaces: boolean;
}
