/**
 * Loads the tokenizer of a converted model directory with transformers.js,
 * strictly offline.
 */
import { basename, dirname, resolve } from "node:path";
import { AutoTokenizer, env, type PreTrainedTokenizer } from "@huggingface/transformers";

export interface TextTokenizer {
  /** Token ids of `text` as is: chat templates already spell out the special tokens. */
  encode(text: string): number[];
  /** Text of `ids`, special tokens dropped. */
  decode(ids: readonly number[]): string;
}

/** The transformers.js tokenizer of a converted model directory, loaded strictly offline. */
export async function loadTransformersTokenizer(modelDir: string): Promise<PreTrainedTokenizer> {
  const dir = resolve(modelDir);
  // transformers.js resolves ids against a single global root; never fall back to the Hub.
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = dirname(dir);
  return AutoTokenizer.from_pretrained(basename(dir));
}

export async function loadTokenizer(modelDir: string): Promise<TextTokenizer> {
  const tok = await loadTransformersTokenizer(modelDir);
  return {
    encode: (text) => tok.encode(text, { add_special_tokens: false }),
    // transformers.js throws on an empty list rather than returning "".
    decode: (ids) => (ids.length ? tok.decode(ids as number[], { skip_special_tokens: true }) : ""),
  };
}
