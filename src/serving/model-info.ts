/** Per-directory facts the serving path needs (vocabulary size, sampling defaults, chat template), read once. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type ChatTemplateSource, loadChatTemplateSource } from "../chat/index.ts";
import type { GenerationDefaults } from "../protocol/to-engine.ts";

export interface ModelInfo {
  vocabSize: number;
  generationDefaults: GenerationDefaults;
  chatSource: ChatTemplateSource;
}

const cache = new Map<string, ModelInfo>();

function readJson(path: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  } catch {
    return {};
  }
}

export function modelInfo(dir: string): ModelInfo {
  let info = cache.get(dir);
  if (!info) {
    const config = readJson(join(dir, "config.json"));
    const gen = readJson(join(dir, "generation_config.json"));
    const num = (k: string) => (typeof gen[k] === "number" ? (gen[k] as number) : undefined);
    info = {
      vocabSize: Number(config.vocab_size),
      generationDefaults: {
        temperature: num("temperature"),
        top_p: num("top_p"),
        top_k: num("top_k"),
        min_p: num("min_p"),
        repetition_penalty: num("repetition_penalty"),
      },
      chatSource: loadChatTemplateSource(dir),
    };
    cache.set(dir, info);
  }
  return info;
}
