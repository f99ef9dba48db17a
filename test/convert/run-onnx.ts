/** Raw onnxruntime-node calls against the decoder contract, independent of ortserve's runner. */
import * as ort from "onnxruntime-node";

export interface RawDecoder {
  session: ort.InferenceSession;
  layers: number;
  kvHeads: number;
  headDim: number;
}

export async function loadRaw(
  path: string,
  layers: number,
  kvHeads: number,
  headDim: number,
): Promise<RawDecoder> {
  const session = await ort.InferenceSession.create(path, {
    graphOptimizationLevel: "all",
    intraOpNumThreads: 1,
  });
  return { session, layers, kvHeads, headDim };
}

export type Past = Record<string, ort.Tensor>;

export function emptyPast(d: RawDecoder): Past {
  const past: Past = {};
  for (let i = 0; i < d.layers; i++)
    for (const kv of ["key", "value"])
      past[`past_key_values.${i}.${kv}`] = new ort.Tensor("float32", new Float32Array(0), [
        1,
        d.kvHeads,
        0,
        d.headDim,
      ]);
  return past;
}

/** One forward pass of `ids` after `pastLen` cached positions; returns logits rows and the new past. */
export async function step(
  d: RawDecoder,
  ids: number[],
  past: Past,
  pastLen: number,
  keep = 0,
): Promise<{ logits: Float32Array; rows: number; vocab: number; past: Past }> {
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, ids.length]),
    attention_mask: new ort.Tensor("int64", new BigInt64Array(pastLen + ids.length).fill(1n), [
      1,
      pastLen + ids.length,
    ]),
    position_ids: new ort.Tensor("int64", BigInt64Array.from(ids.map((_, i) => BigInt(pastLen + i))), [
      1,
      ids.length,
    ]),
    ...past,
  };
  feeds.num_logits_to_keep = new ort.Tensor("int64", BigInt64Array.of(BigInt(keep)), []);
  const out = await d.session.run(feeds);
  const next: Past = {};
  for (let i = 0; i < d.layers; i++)
    for (const kv of ["key", "value"]) next[`past_key_values.${i}.${kv}`] = out[`present.${i}.${kv}`]!;
  const logits = out.logits!;
  return { logits: logits.data as Float32Array, rows: logits.dims[1]!, vocab: logits.dims[2]!, past: next };
}

export function argmax(row: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}
