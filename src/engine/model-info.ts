/** Per-directory facts the main thread needs (vocabulary size, sampling defaults, chat template), read once. */
import { type ChatTemplateSource, loadChatTemplateSource } from "../chat/index.ts";
import { type GenerationDefaults, readModelConfig } from "../core/model/model-config.ts";

export interface ModelInfo {
  vocabSize: number;
  generationDefaults: GenerationDefaults;
  chatSource: ChatTemplateSource;
}

const cache = new Map<string, ModelInfo>();

export function modelInfo(dir: string): ModelInfo {
  let info = cache.get(dir);
  if (!info) {
    const { decoder, generationDefaults } = readModelConfig(dir);
    info = { vocabSize: decoder.vocabSize, generationDefaults, chatSource: loadChatTemplateSource(dir) };
    cache.set(dir, info);
  }
  return info;
}
