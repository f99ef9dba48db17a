/**
 * What every benchmarked engine implements. Both measurements start from an
 * empty sequence so runs are independent; only the named phase is timed.
 */

export interface PrefillResult {
  seconds: number;
}

export interface DecodeResult {
  /** Time for `n` single-token greedy steps after an untimed prefill. */
  seconds: number;
  /** The greedy ids: the one chosen from the prompt's logits, then one per timed step. */
  ids: number[];
}

export interface BenchEngine {
  readonly name: string;
  /** Extra facts worth reporting (e.g. whether logits are trimmed). */
  readonly notes: Record<string, unknown>;
  /** Time to process `prompt` and get the next-token logits. */
  prefill(prompt: readonly number[]): Promise<PrefillResult>;
  /** Greedy decode of `n` tokens after `prompt`, ignoring EOS. */
  decode(prompt: readonly number[], n: number): Promise<DecodeResult>;
  /** Weight bytes one decode step reads (the packed matmul weights), when the engine knows. */
  weightBytesRead?(): Promise<number | undefined>;
  close(): Promise<void>;
}
