/**
 * Incremental detokenizer for streaming. Byte-level BPE tokens can end in the
 * middle of a UTF-8 character, which decodes to U+FFFD until the rest arrives;
 * text is only emitted once the decoded suffix no longer ends in U+FFFD.
 *
 * Rather than re-decoding every generated id on each step, only a sliding
 * window is decoded: from the ids of the previous emission (kept as context so
 * tokenizers that treat a leading token specially decode it the same way both
 * times) up to the newest id. For byte-level BPE, whose decoding has no
 * cross-token effects beyond UTF-8 assembly, the emitted text equals decoding
 * all ids at once.
 */

export type DecodeFn = (ids: readonly number[]) => string;

const REPLACEMENT = "\uFFFD";

export class IncrementalDetokenizer {
  readonly #decode: DecodeFn;
  readonly #ids: number[] = [];
  /** Start of the decode window. */
  #prefix = 0;
  /** End of the ids whose text has been emitted. */
  #read = 0;

  constructor(decode: DecodeFn) {
    this.#decode = decode;
  }

  /** Adds one id; returns the newly completed text (possibly empty). */
  push(id: number): string {
    this.#ids.push(id);
    const done = this.#decode(this.#ids.slice(this.#prefix, this.#read));
    const now = this.#decode(this.#ids.slice(this.#prefix));
    if (now.length <= done.length || now.endsWith(REPLACEMENT)) return "";
    this.#prefix = this.#read;
    this.#read = this.#ids.length;
    return now.slice(done.length);
  }

  /** Text still held back at the end of generation (may hold U+FFFD if a character was cut off). */
  flush(): string {
    if (this.#read === this.#ids.length) return "";
    const done = this.#decode(this.#ids.slice(this.#prefix, this.#read));
    const now = this.#decode(this.#ids.slice(this.#prefix));
    this.#prefix = this.#read = this.#ids.length;
    return now.slice(done.length);
  }
}
