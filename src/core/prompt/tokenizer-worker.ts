/**
 * Thread entry of a model's prompt tokenizer (`TokenizerThread`): loads the model's tokenizer and
 * encodes prompts (stopping once one cannot fit) and word lists, and decodes ids (/detokenize), so no prompt's tokenization runs
 * on the thread that steps the model.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { ReadyMessage as WorkerReady } from "../../util/worker-calls.ts";
import { fromTransformersTokenizer } from "../output/transformers-adapter.ts";
import { loadTransformersTokenizer } from "../runner/tokenizer.ts";
import { type BoundedIds, encodeBounded, type PieceEncoder, slicesExactly } from "./bounded-encode.ts";
import { maxBytesPerToken } from "./size-bound.ts";

export type TokenizeJob =
  | {
      id: number;
      kind: "prompt";
      text: string;
      addSpecialTokens: boolean;
      limit: number;
      keepLast?: number;
    }
  | { id: number; kind: "words"; texts: string[] }
  | { id: number; kind: "decode"; ids: number[] };

export type TokenizeReply =
  | { id: number; result: BoundedIds }
  | { id: number; lists: number[][] }
  | { id: number; text: string }
  | { id: number; error: string };

/** Sent once, after the tokenizer loaded (or failed to). */
export type ReadyMessage = WorkerReady<{ maxBytesPerToken?: number; sliceable: boolean }>;

const port = parentPort!;
const modelDir = workerData as string;

try {
  const tok = await loadTransformersTokenizer(modelDir);
  const encode = (text: string) => tok.encode(text, { add_special_tokens: false });
  // The ids special tokens add around any text: a one-letter text with and without them.
  const plain = encode("a");
  const full = tok.encode("a", { add_special_tokens: true });
  const at = full.findIndex((_, i) => plain.every((id, j) => full[i + j] === id));
  const specials = {
    before: full.slice(0, Math.max(at, 0)),
    after: full.slice(Math.max(at, 0) + plain.length),
  };
  const enc: PieceEncoder = { encode, specials, sliceable: at >= 0 && slicesExactly(encode) };
  const bytesPerToken = maxBytesPerToken(
    fromTransformersTokenizer(tok),
    tok._tokenizerJSON?.normalizer != null,
  );
  port.postMessage({
    ready: { maxBytesPerToken: bytesPerToken, sliceable: enc.sliceable },
  } satisfies ReadyMessage);
  port.on("message", (job: TokenizeJob) => {
    try {
      if (job.kind === "words")
        port.postMessage({ id: job.id, lists: job.texts.map(encode) } satisfies TokenizeReply);
      // Special tokens stay in the text, as vLLM's /detokenize gives them.
      else if (job.kind === "decode")
        port.postMessage({
          id: job.id,
          text: tok.decode(job.ids, { skip_special_tokens: false }),
        } satisfies TokenizeReply);
      else
        port.postMessage({
          id: job.id,
          result: encodeBounded(enc, job.text, job.addSpecialTokens, {
            limit: job.limit,
            keepLast: job.keepLast,
            maxBytesPerToken: bytesPerToken ?? Number.POSITIVE_INFINITY,
          }),
        } satisfies TokenizeReply);
    } catch (err) {
      port.postMessage({ id: job.id, error: (err as Error).message } satisfies TokenizeReply);
    }
  });
} catch (err) {
  port.postMessage({ failed: (err as Error).message } satisfies ReadyMessage);
}
