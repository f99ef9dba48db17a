/**
 * One sequence's output text: the detokenizer followed by stop strings, wired
 * the way vLLM's BaseIncrementalDetokenizer.update / get_next_output_text
 * (vllm/v1/engine/detokenizer.py) wire them:
 * - a token the engine stopped on (EOS or a stop_token_id) is left out of the
 *   text unless include_stop_str_in_output is set;
 * - stop strings are not searched in the text of the first `minTokens` tokens
 *   (a stop may still begin there and end later);
 * - at the end only the stop-string hold-back is released; an unfinished
 *   trailing character stays unsent, as in vLLM.
 */
import { type DetokenizerOptions, IncrementalDetokenizer } from "./detokenizer.ts";
import { type StopStep, StopStringMatcher } from "./stop-strings.ts";
import type { TokenizerLike } from "./tokenizer-like.ts";

export interface SequenceTextOptions extends DetokenizerOptions {
  stop?: readonly string[];
  includeStopStrInOutput?: boolean;
  minTokens?: number;
}

export class SequenceText {
  readonly #detokenizer: IncrementalDetokenizer;
  readonly #stops: StopStringMatcher;
  readonly #includeStop: boolean;
  readonly #minTokens: number;
  #tokens = 0;

  constructor(tokenizer: TokenizerLike, options: SequenceTextOptions = {}) {
    this.#detokenizer = new IncrementalDetokenizer(tokenizer, options);
    this.#includeStop = options.includeStopStrInOutput ?? false;
    this.#stops = new StopStringMatcher(options.stop ?? [], this.#includeStop);
    this.#minTokens = options.minTokens ?? 0;
  }

  /** True once a stop string ended the sequence. */
  get stopped(): boolean {
    return this.#stops.stopped;
  }

  /**
   * Adds one generated token. `stopToken`: the engine finished the sequence
   * on this token (EOS or a stop_token_id).
   */
  push(id: number, stopToken = false): StopStep {
    this.#tokens++;
    const delta = stopToken && !this.#includeStop ? "" : this.#detokenizer.push(id);
    return this.#stops.push(delta, this.#tokens > this.#minTokens);
  }

  /** Text still held back when the sequence ends for any reason. */
  finish(): string {
    return this.#stops.flush();
  }
}
