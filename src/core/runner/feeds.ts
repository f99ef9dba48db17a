/**
 * Builds the non-KV inputs of one decoder step for a single sequence
 * (batch 1): token ids, an all-ones attention mask over past + new positions,
 * and absolute position ids continuing after the cached length.
 */
import { Tensor } from "onnxruntime-node";

export const LOGITS_TO_KEEP = "num_logits_to_keep";

function int64(values: ArrayLike<number>, dims: number[]): Tensor {
  const data = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = BigInt(values[i]);
  return new Tensor("int64", data, dims);
}

export function buildStepFeeds(tokenIds: readonly number[], pastLength: number): Record<string, Tensor> {
  const n = tokenIds.length;
  const total = pastLength + n;
  const positions = new Array<number>(n);
  for (let i = 0; i < n; i++) positions[i] = pastLength + i;
  return {
    input_ids: int64(tokenIds, [1, n]),
    attention_mask: int64(new Array<number>(total).fill(1), [1, total]),
    position_ids: int64(positions, [1, n]),
  };
}

/** Scalar for `num_logits_to_keep`: 0 = logits for every position, k = only the last k. */
export function logitsToKeepFeed(k: number): Tensor {
  return int64([k], []);
}
