/**
 * Greedy decoding over a DecoderSequence: argmax of each step's logits.
 */
import type { DecoderSequence } from "./decoder-session.ts";

/** Index of the largest value in `row` (first one on ties, as torch.argmax); NaN never wins. */
export function argmax(row: Float32Array, offset = 0, length = row.length - offset): number {
  let best = 0;
  let bestVal = Number.NEGATIVE_INFINITY;
  const end = offset + length;
  for (let i = offset; i < end; i++) {
    const v = row[i];
    if (v > bestVal) {
      bestVal = v;
      best = i - offset;
    }
  }
  return best;
}

export interface GreedyOptions {
  /** Called with each new token as soon as it is chosen (the stop token included). */
  onToken?: (id: number) => void;
}

/**
 * Feeds `promptIds` (non-empty) and generates up to `maxNewTokens` tokens
 * greedily. Returns the generated ids; a stop id ends generation and is kept
 * as the last id (so callers can tell why it ended) but is not fed back.
 */
export async function generateGreedy(
  seq: DecoderSequence,
  promptIds: readonly number[],
  maxNewTokens: number,
  stopIds: readonly number[],
  opts: GreedyOptions = {},
): Promise<number[]> {
  const out: number[] = [];
  if (maxNewTokens <= 0) return out;
  const stops = new Set(stopIds);
  let logits = await seq.forward(promptIds);
  for (;;) {
    const id = argmax(logits);
    out.push(id);
    opts.onToken?.(id);
    if (stops.has(id) || out.length >= maxNewTokens) return out;
    logits = await seq.forward([id]);
  }
}
