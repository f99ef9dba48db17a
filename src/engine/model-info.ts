/** Per-directory facts the main thread needs (vocabulary size, sampling defaults, chat template), read once. */
import { type ChatTemplateSource, loadChatTemplateSource } from "../chat/index.ts";
import { type GenerationDefaults, readModelConfig } from "../core/model/model-config.ts";

export interface ModelInfo {
  vocabSize: number;
  generationDefaults: GenerationDefaults;
  chatSource: ChatTemplateSource;
}

/** By directory and revision (a model pulled again at the same path is read afresh). */
const cache = new Map<string, ModelInfo>();
const keyOf = (dir: string, revision: string) => `${revision}:${dir}`;

export function modelInfo(dir: string, revision = ""): ModelInfo {
  const key = keyOf(dir, revision);
  let info = cache.get(key);
  if (!info) {
    const { decoder, generationDefaults } = readModelConfig(dir);
    info = { vocabSize: decoder.vocabSize, generationDefaults, chatSource: loadChatTemplateSource(dir) };
    cache.set(key, info);
  }
  return info;
}

/** Drops what was read from a directory's revision (removed or replaced). */
export function forgetModelInfo(dir: string, revision: string): void {
  cache.delete(keyOf(dir, revision));
}
