/**
 * What differs between decoder architectures, as data. The graph builder and the weight mapping
 * read only this table, so a new llama-family architecture is a new row, not a new converter.
 */
import type { GgufValue } from "../gguf/types.ts";

export interface ArchitectureSpec {
  /** GGUF `general.architecture` value and metadata key prefix. */
  gguf: string;
  /** config.json model_type / architectures for the Hugging Face layout. */
  modelType: string;
  hfArchitecture: string;
  /** llama.cpp's llama converter permutes Q/K rows for consecutive-pair RoPE; undo it. */
  unpermuteQk: boolean;
  /** Q/K/V projections carry biases (qwen2). */
  qkvBias: boolean;
  /** Per-head RMSNorm on Q and K before RoPE (qwen3, gemma3). */
  qkNorm: boolean;
}

export const ARCHITECTURES: Record<string, ArchitectureSpec> = {
  llama: {
    gguf: "llama",
    modelType: "llama",
    hfArchitecture: "LlamaForCausalLM",
    unpermuteQk: true,
    qkvBias: false,
    qkNorm: false,
  },
};

export interface Hyperparameters {
  arch: ArchitectureSpec;
  layers: number;
  hidden: number;
  ffn: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vocab: number;
  contextLength: number;
  ropeTheta: number;
  rmsEps: number;
}

function num(metadata: Map<string, GgufValue>, key: string, fallback?: number): number {
  const v = metadata.get(key);
  if (v === undefined) {
    if (fallback === undefined) throw new Error(`GGUF metadata lacks ${key}`);
    return fallback;
  }
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  throw new Error(`GGUF metadata ${key} is not a number`);
}

export function readHyperparameters(metadata: Map<string, GgufValue>): Hyperparameters {
  const name = metadata.get("general.architecture");
  const arch = typeof name === "string" ? ARCHITECTURES[name] : undefined;
  if (!arch)
    throw new Error(
      `unsupported architecture ${JSON.stringify(name)}; supported: ${Object.keys(ARCHITECTURES).join(", ")}`,
    );
  const p = arch.gguf;
  const hidden = num(metadata, `${p}.embedding_length`);
  const heads = num(metadata, `${p}.attention.head_count`);
  const tokens = metadata.get("tokenizer.ggml.tokens");
  const tokenCount = Array.isArray(tokens) ? tokens.length : undefined;
  return {
    arch,
    layers: num(metadata, `${p}.block_count`),
    hidden,
    ffn: num(metadata, `${p}.feed_forward_length`),
    heads,
    kvHeads: num(metadata, `${p}.attention.head_count_kv`, heads),
    headDim: num(metadata, `${p}.attention.key_length`, hidden / heads),
    vocab: num(metadata, `${p}.vocab_size`, tokenCount),
    contextLength: num(metadata, `${p}.context_length`),
    ropeTheta: num(metadata, `${p}.rope.freq_base`, 10000),
    rmsEps: num(metadata, `${p}.attention.layer_norm_rms_epsilon`),
  };
}

/** Hyperparameters from a Hugging Face config.json (a training run's), by its model_type. */
export function hyperparametersFromHfConfig(config: Record<string, unknown>): Hyperparameters {
  const arch = Object.values(ARCHITECTURES).find((a) => a.modelType === config.model_type);
  if (!arch)
    throw new Error(
      `unsupported model_type ${JSON.stringify(config.model_type)}; supported: ${Object.values(ARCHITECTURES)
        .map((a) => a.modelType)
        .join(", ")}`,
    );
  const get = (key: string, fallback?: number): number => {
    const v = config[key] ?? fallback;
    if (typeof v !== "number" || !Number.isFinite(v)) throw new Error(`config.json lacks a numeric ${key}`);
    return v;
  };
  const hidden = get("hidden_size");
  const heads = get("num_attention_heads");
  return {
    arch,
    layers: get("num_hidden_layers"),
    hidden,
    ffn: get("intermediate_size"),
    heads,
    kvHeads: get("num_key_value_heads", heads),
    headDim: get("head_dim", hidden / heads),
    vocab: get("vocab_size"),
    contextLength: get("max_position_embeddings"),
    ropeTheta: get("rope_theta", 10000),
    rmsEps: get("rms_norm_eps"),
  };
}
