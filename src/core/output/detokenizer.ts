/**
 * Per-sequence incremental detokenizer: one generated id in, the new text out.
 *
 * It reproduces vLLM's FastIncrementalDetokenizer (vllm/v1/engine/detokenizer.py),
 * which drives HF tokenizers' `DecodeStream` (tokenizers/src/tokenizer/mod.rs,
 * `step_decode_stream`). The stream keeps a short window of ids: the ids whose
 * text was emitted last (`prefix`, decoded as `prefixText`) followed by the ids
 * not emitted yet. Each step decodes only that window, so work per token is
 * O(1) amortized and the text matches decoding every id at once:
 * - nothing is emitted while the window's text ends in U+FFFD: a byte-level
 *   token can stop in the middle of a UTF-8 character, and only the next
 *   tokens tell whether the bytes were incomplete or really invalid. Invalid
 *   bytes followed by more text are emitted as U+FFFD, like a full decode;
 * - the prefix ids stay in the window so that decoders which treat a leading
 *   token specially (SentencePiece's leading space) decode it the same way
 *   both times;
 * - when the new text does not extend the previous text (DecodeStream's
 *   "Invalid prefix encountered"), vLLM starts a fresh stream at this id.
 *
 * `spacesBetweenSpecialTokens` (default true): HF tokenizers' Rust `decode`
 * never puts spaces between added tokens, so for fast tokenizers the flag only
 * matters inside vLLM's detokenizer: with special tokens kept and the flag
 * false, an added token that directly follows another added token is emitted
 * as its bare content, dropping whatever the decoder put in front of it (a
 * Metaspace decoder's space). Byte-level decoders put nothing there, so for
 * them both settings give the same text. Only HF's slow Python tokenizers join
 * added tokens with " " (`_convert_tokens_to_string_with_added_encoders`);
 * transformers.js has no slow tokenizers.
 *
 * At the end of a sequence vLLM emits nothing more: a trailing incomplete
 * character is dropped. `flush()` returns that tail for callers that want it.
 */
import type { TokenizerLike } from "./tokenizer-like.ts";

const REPLACEMENT = "\uFFFD";

/** Prompt ids vLLM replays before the first generated one (a clean suffix of 4 to 23 ids). */
const PRIME_MIN = 4;
const PRIME_MAX = 23;

export interface DetokenizerOptions {
  /** Drop special added tokens from the text (vLLM default true). */
  skipSpecialTokens?: boolean;
  /** See the module comment (vLLM default true). */
  spacesBetweenSpecialTokens?: boolean;
  /**
   * The prompt, so the first generated token decodes in context (a leading
   * space or the end of a character the prompt started). Its text is not emitted.
   */
  promptIds?: readonly number[];
}

export class IncrementalDetokenizer {
  readonly #tokenizer: TokenizerLike;
  readonly #skipSpecialTokens: boolean;
  /** Emit an added token that follows another added token as its bare content. */
  readonly #bareAdjacentAdded: boolean;
  /** The decode window: prefix ids, then ids whose text is not emitted yet. */
  #window: number[] = [];
  #prefixLength = 0;
  #prefixText = "";
  /** Generated ids pushed since text was last emitted. */
  #held = 0;
  #lastWasAdded = false;

  constructor(tokenizer: TokenizerLike, options: DetokenizerOptions = {}) {
    this.#tokenizer = tokenizer;
    this.#skipSpecialTokens = options.skipSpecialTokens ?? true;
    const spaces = this.#skipSpecialTokens || (options.spacesBetweenSpecialTokens ?? true);
    this.#bareAdjacentAdded = !spaces && tokenizer.addedTokens.size > 0;
    if (options.promptIds && options.promptIds.length > 0) this.#prime(options.promptIds);
  }

  /** Adds one generated id; returns the text it completes, possibly "". */
  push(id: number): string {
    this.#held++;
    const text = this.#step(id);
    if (!this.#bareAdjacentAdded) return text;
    const content = this.#tokenizer.addedTokens.get(id);
    const out = content !== undefined && this.#lastWasAdded ? content : text;
    this.#lastWasAdded = content !== undefined;
    return out;
  }

  /**
   * Text still held back at the end, as a full decode renders it (so it ends
   * in U+FFFD). vLLM never emits it.
   */
  flush(): string {
    if (this.#held === 0) return "";
    const text = this.#decode(this.#window);
    const tail = text.startsWith(this.#prefixText) ? text.slice(this.#prefixText.length) : text;
    this.#emit();
    return tail;
  }

  #step(id: number): string {
    this.#window.push(id);
    const text = this.#decode(this.#window);
    if (text.endsWith(REPLACEMENT)) return "";
    if (!text.startsWith(this.#prefixText)) {
      // DecodeStream compares UTF-8 lengths before it checks the prefix.
      if (Buffer.byteLength(text) <= Buffer.byteLength(this.#prefixText)) return "";
      this.#window = [];
      this.#prefixLength = 0;
      this.#prefixText = "";
      return this.#step(id);
    }
    if (text.length === this.#prefixText.length) return "";
    const delta = text.slice(this.#prefixText.length);
    this.#emit();
    return delta;
  }

  /** The unemitted ids become the next prefix. */
  #emit(): void {
    this.#window = this.#window.slice(this.#prefixLength);
    this.#prefixLength = this.#window.length;
    this.#prefixText = this.#decode(this.#window);
    this.#held = 0;
  }

  /** vLLM replays the shortest prompt suffix (4 to 23 ids) that decodes without U+FFFD, else the whole prompt. */
  #prime(promptIds: readonly number[]): void {
    let suffix = promptIds;
    if (promptIds.length > PRIME_MIN) {
      for (let n = PRIME_MIN; n <= Math.min(promptIds.length, PRIME_MAX); n++) {
        const candidate = promptIds.slice(-n);
        if (!this.#tokenizer.decode(candidate, { skipSpecialTokens: true }).includes(REPLACEMENT)) {
          suffix = candidate;
          break;
        }
      }
    }
    for (const id of suffix) this.#step(id);
  }

  #decode(ids: readonly number[]): string {
    return this.#tokenizer.decode(ids, { skipSpecialTokens: this.#skipSpecialTokens });
  }
}
