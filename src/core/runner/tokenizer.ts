/**
 * Loads the tokenizer of a converted model directory with transformers.js,
 * strictly offline.
 */
import { basename, dirname, resolve } from "node:path";
import { AutoTokenizer, env, type PreTrainedTokenizer } from "@huggingface/transformers";

/** The transformers.js tokenizer of a converted model directory, loaded strictly offline. */
export async function loadTransformersTokenizer(modelDir: string): Promise<PreTrainedTokenizer> {
  const dir = resolve(modelDir);
  // transformers.js resolves ids against a single global root; never fall back to the Hub.
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = dirname(dir);
  return AutoTokenizer.from_pretrained(basename(dir));
}
