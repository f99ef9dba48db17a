/**
 * Reads the Hugging Face config files of a converted model directory into the
 * few numbers the runner needs to size KV tensors and stop generation.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";

export interface DecoderConfig {
  numLayers: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  eosTokenIds: number[];
  bosTokenId?: number;
  maxPositions: number;
}

type Json = Record<string, unknown>;

async function readJson(path: string): Promise<Json | undefined> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as Json;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
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
  };
}

export async function loadDecoderConfig(modelDir: string): Promise<DecoderConfig> {
  const cfg = await readJson(join(modelDir, "config.json"));
  if (!cfg) throw new Error(`${modelDir}: config.json not found`);
  const gen = await readJson(join(modelDir, "generation_config.json"));
  return parseDecoderConfig(cfg, gen);
}
