/**
 * A Hugging Face checkpoint (config.json + safetensors, as a training run saves them) of a model
 * ortserve already serves → a model directory like `convert` writes: the same decoder graph from
 * the checkpoint's weights, and the served model's tokenizer and generation settings (a training
 * run keeps its tokenizer).
 */
import { copyFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { openSafetensors } from "../safetensors/reader.ts";
import { hyperparametersFromHfConfig } from "./architectures.ts";
import { type ConvertOptions, convertedFormats, writeDecoderOnnx, writeJson } from "./convert.ts";
import { buildModelConfig, type SpecialTokenIds } from "./hf-config.ts";
import { safetensorsWeightProvider } from "./safetensors-weights.ts";

/** Files taken from the served model as they are (those it has). */
const SHARED_FILES = [
  "tokenizer.json",
  "tokenizer_config.json",
  "generation_config.json",
  "chat_template.jinja",
];

function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
}

function specialIds(config: Record<string, unknown>): SpecialTokenIds {
  const num = (v: unknown) => (typeof v === "number" ? v : undefined);
  const eos = config.eos_token_id;
  const eosIds = (Array.isArray(eos) ? eos : [eos]).filter((v): v is number => typeof v === "number");
  return { bosId: num(config.bos_token_id), eosIds, padId: num(config.pad_token_id) };
}

export function convertSafetensors(
  checkpointDir: string,
  baseModelDir: string,
  outDir: string,
  opts: ConvertOptions,
): void {
  const base = readJson(join(baseModelDir, "config.json"));
  const ownConfig = join(checkpointDir, "config.json");
  const config = existsSync(ownConfig) ? readJson(ownConfig) : base;
  const hp = hyperparametersFromHfConfig(config);
  if (hp.vocab !== base.vocab_size)
    throw new Error(
      `${checkpointDir}: vocab_size ${hp.vocab} differs from the served model's ${String(base.vocab_size)}`,
    );
  const set = openSafetensors(checkpointDir);
  try {
    const tied = config.tie_word_embeddings === true || !set.tensor("lm_head.weight");
    writeDecoderOnnx(outDir, hp, safetensorsWeightProvider(set, hp, tied, opts.format), opts);
    for (const f of SHARED_FILES)
      if (existsSync(join(baseModelDir, f))) copyFileSync(join(baseModelDir, f), join(outDir, f));
    writeJson(
      join(outDir, "config.json"),
      buildModelConfig(hp, specialIds(base), tied, convertedFormats(outDir)),
    );
  } finally {
    set.close();
  }
}
