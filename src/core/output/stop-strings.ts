/**
 * Stop strings over streamed text, as vLLM applies them after detokenizing
 * (`check_stop_strings` and `get_next_output_text` in vllm/v1/engine/detokenizer.py):
 * - each delta is searched together with the last len(stop) − 1 characters
 *   before it, so a stop split across deltas is found, and found once;
 * - stops are tried in the order given and the first one that occurs wins,
 *   at its first occurrence: with stops ["bc", "ab"] and the delta "abc" the
 *   cut is after "a" — the list order decides, not the earliest position;
 * - the text is cut at the start of the stop, or after it with
 *   includeStopStrInOutput; whatever followed it is dropped;
 * - while streaming, the last (longest stop − 1) characters are held back so
 *   that a stop's beginning is never sent before the stop is recognised.
 *   vLLM holds back only when stops are excluded from the output: when they
 *   are included, text sent early is part of the output either way.
 * "Characters" are code points (Python `len`), so holding back never splits a
 * surrogate pair.
 */
import { codePointLength } from "../../util/code-points.ts";

export interface StopStep {
  /** Text that may be sent now. */
  text: string;
  /** The stop string that ended the sequence, when one did. */
  stop?: string;
}

export class StopStringMatcher {
  readonly #stops: readonly string[];
  readonly #include: boolean;
  /** Code points kept back while streaming. */
  readonly #holdBack: number;
  /** UTF-16 units of sent text kept so a stop can start before the pending text. */
  readonly #contextLength: number;
  #sentTail = "";
  #pending = "";
  #stopped = false;

  constructor(stops: readonly string[], includeStopStrInOutput: boolean) {
    // An empty stop would match everywhere; request validation rejects it.
    if (stops.some((s) => s.length === 0)) throw new RangeError("stop strings must not be empty");
    this.#stops = [...stops];
    this.#include = includeStopStrInOutput;
    const longest = Math.max(0, ...stops.map(codePointLength));
    this.#holdBack = includeStopStrInOutput ? 0 : Math.max(0, longest - 1);
    this.#contextLength = Math.max(0, ...stops.map((s) => s.length - 1));
  }

  /** True once a stop string matched; later text is ignored. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /**
   * Adds newly decoded text. With `checkStops` false the text is kept but not
   * searched, as vLLM does for the tokens before `min_tokens`; a later search
   * still looks len(stop) − 1 characters back into it.
   */
  push(delta: string, checkStops = true): StopStep {
    if (this.#stopped) return { text: "" };
    const deltaStart = this.#sentTail.length + this.#pending.length;
    this.#pending += delta;
    if (checkStops && delta.length > 0) {
      const haystack = this.#sentTail + this.#pending;
      for (const stop of this.#stops) {
        const at = haystack.indexOf(stop, Math.max(0, deltaStart - stop.length + 1));
        if (at === -1) continue;
        // A match ends inside the delta, so the part before it is within the
        // held-back text (or, when stops are included, the cut lies past the sent text).
        const cut = this.#include ? at + stop.length : at;
        this.#stopped = true;
        this.#pending = "";
        return { text: haystack.slice(this.#sentTail.length, cut), stop };
      }
    }
    return { text: this.#send(startOfLastCodePoints(this.#pending, this.#holdBack)) };
  }

  /** Releases the held-back text at the end of the sequence. */
  flush(): string {
    if (this.#stopped) return "";
    return this.#send(this.#pending.length);
  }

  #send(end: number): string {
    const text = this.#pending.slice(0, end);
    this.#pending = this.#pending.slice(end);
    if (text.length > 0) {
      const sent = this.#sentTail + text;
      this.#sentTail = sent.slice(sent.length - Math.min(sent.length, this.#contextLength));
    }
    return text;
  }
}

/** Index where the last `count` code points of `s` begin. */
function startOfLastCodePoints(s: string, count: number): number {
  let i = s.length;
  for (let k = 0; k < count && i > 0; k++) {
    i--;
    const low = s.charCodeAt(i);
    if (i > 0 && low >= 0xdc00 && low <= 0xdfff) {
      const high = s.charCodeAt(i - 1);
      if (high >= 0xd800 && high <= 0xdbff) i--;
    }
  }
  return i;
}
