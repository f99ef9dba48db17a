/**
 * Reads the Hugging Face config files of a converted model directory (config.json and
 * generation_config.json) once, strictly: the numbers the runner needs to size KV tensors and
 * stop generation, and the sampling defaults requests fall back on.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export interface DecoderConfig {
  numLayers: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  eosTokenIds: number[];
  bosTokenId?: number;
  maxPositions: number;
  /**
   * Per layer, the sliding window it attends within (positions, its own included), 0 for a
   * global layer: config.json's `sliding_window` on the layers `layer_types` names
   * "sliding_attention" (gemma3's five local layers of six). Without layer_types, every layer is
   * read as global (the cache then holds every position of every layer, which is always correct).
   */
  layerWindows: number[];
}

/** Sampling defaults from generation_config.json (absent keys fall back to vLLM's). */
export interface GenerationDefaults {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  repetition_penalty?: number;
}

export interface ModelConfig {
  decoder: DecoderConfig;
  generationDefaults: GenerationDefaults;
}

type Json = Record<string, unknown>;

function readJson(path: string): Json | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  return JSON.parse(text) as Json;
}

function requireInt(cfg: Json, key: string): number {
  const v = cfg[key];
  if (typeof v !== "number" || !Number.isInteger(v)) throw new Error(`config.json: missing integer "${key}"`);
  return v;
}

/** eos_token_id may be a number or a list in either file; merge both so no stop id is lost. */
function collectIds(...values: unknown[]): number[] {
  const ids = new Set<number>();
  for (const v of values) {
    for (const id of Array.isArray(v) ? v : [v]) if (typeof id === "number") ids.add(id);
  }
  return [...ids];
}

export function parseDecoderConfig(cfg: Json, gen: Json = {}): DecoderConfig {
  const numHeads = requireInt(cfg, "num_attention_heads");
  const hidden = requireInt(cfg, "hidden_size");
  const bos = gen.bos_token_id ?? cfg.bos_token_id;
  return {
    numLayers: requireInt(cfg, "num_hidden_layers"),
    // Older configs omit these: no GQA and head_dim = hidden / heads.
    numKvHeads: typeof cfg.num_key_value_heads === "number" ? cfg.num_key_value_heads : numHeads,
    headDim: typeof cfg.head_dim === "number" ? cfg.head_dim : hidden / numHeads,
    vocabSize: requireInt(cfg, "vocab_size"),
    eosTokenIds: collectIds(gen.eos_token_id, cfg.eos_token_id),
    bosTokenId: typeof bos === "number" ? bos : undefined,
    maxPositions: requireInt(cfg, "max_position_embeddings"),
    layerWindows: layerWindows(cfg, requireInt(cfg, "num_hidden_layers")),
  };
}

function layerWindows(cfg: Json, layers: number): number[] {
  const window = cfg.sliding_window;
  const kinds = cfg.layer_types;
  if (typeof window !== "number" || !Number.isInteger(window) || window <= 0 || !Array.isArray(kinds))
    return new Array<number>(layers).fill(0);
  if (kinds.length !== layers)
    throw new Error(`config.json: "layer_types" names ${kinds.length} layers, but there are ${layers}`);
  return kinds.map((kind) => (kind === "sliding_attention" ? window : 0));
}

export function parseGenerationDefaults(gen: Json): GenerationDefaults {
  const num = (k: string) => (typeof gen[k] === "number" ? (gen[k] as number) : undefined);
  return {
    temperature: num("temperature"),
    top_p: num("top_p"),
    top_k: num("top_k"),
    min_p: num("min_p"),
    repetition_penalty: num("repetition_penalty"),
  };
}

/** Throws when config.json is missing or lacks a required number; generation_config.json is optional. */
export function readModelConfig(modelDir: string): ModelConfig {
  const cfg = readJson(join(modelDir, "config.json"));
  if (!cfg) throw new Error(`${modelDir}: config.json not found`);
  const gen = readJson(join(modelDir, "generation_config.json")) ?? {};
  return { decoder: parseDecoderConfig(cfg, gen), generationDefaults: parseGenerationDefaults(gen) };
}
