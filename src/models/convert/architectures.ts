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
  /**
   * Gemma's block (llama.cpp's gemma3 graph): token embeddings scaled by sqrt(hidden), an RMSNorm
   * after attention and after the MLP as well as before each (sandwich norms), GeGLU with tanh
   * GELU instead of SwiGLU, and sliding-window attention on the layers `localLayers` names.
   */
  gemma: boolean;
}

export const ARCHITECTURES: Record<string, ArchitectureSpec> = {
  llama: {
    gguf: "llama",
    modelType: "llama",
    hfArchitecture: "LlamaForCausalLM",
    unpermuteQk: true,
    qkvBias: false,
    qkNorm: false,
    gemma: false,
  },
  // llama.cpp keeps qwen2 and qwen3 Q/K rows in Hugging Face order and rotates halves (NEOX).
  qwen2: {
    gguf: "qwen2",
    modelType: "qwen2",
    hfArchitecture: "Qwen2ForCausalLM",
    unpermuteQk: false,
    qkvBias: true,
    qkNorm: false,
    gemma: false,
  },
  qwen3: {
    gguf: "qwen3",
    modelType: "qwen3",
    hfArchitecture: "Qwen3ForCausalLM",
    unpermuteQk: false,
    qkvBias: false,
    qkNorm: true,
    gemma: false,
  },
  gemma3: {
    gguf: "gemma3",
    modelType: "gemma3_text",
    hfArchitecture: "Gemma3ForCausalLM",
    unpermuteQk: false,
    qkvBias: false,
    qkNorm: true,
    gemma: true,
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
  /**
   * Per rotated pair, the divisor of its frequency (Llama 3's rope_scaling, which GGUF files carry
   * as the `rope_freqs.weight` tensor); undefined = plain RoPE.
   */
  ropeFreqFactors?: Float32Array;
  rmsEps: number;
  /** Multiplies Q.K (llama.cpp scales Q by it; 1 / sqrt(head_dim) but for Gemma 3 27B). */
  attentionScale: number;
  /**
   * Sliding-window attention: on the layers marked in `local`, a token sees the `window` positions
   * ending at its own (llama.cpp's n_swa), rotated with base `ropeTheta`; the other layers see
   * every position and rotate with the model's base.
   */
  slidingWindow?: { window: number; local: boolean[]; ropeTheta: number };
  /** logits = cap tanh(logits / cap) when set (llama.cpp's final_logit_softcapping). */
  finalLogitSoftcap?: number;
}

/** The GGUF tensor holding RoPE frequency divisors (Llama 3.x rope_scaling). */
export const GGUF_ROPE_FREQS = "rope_freqs.weight";

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

/** `ropeFreqFactors`: the file's `rope_freqs.weight` tensor, when it has one. */
export function readHyperparameters(
  metadata: Map<string, GgufValue>,
  ropeFreqFactors?: Float32Array,
): Hyperparameters {
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
  const headDim = num(metadata, `${p}.attention.key_length`, hidden / heads);
  const valueDim = num(metadata, `${p}.attention.value_length`, headDim);
  if (valueDim !== headDim) throw new Error(`value_length ${valueDim} differs from key_length ${headDim}`);
  // Partial rotary (RoPE on the first dimensions of each head only) is not a row yet.
  const ropeDims = num(metadata, `${p}.rope.dimension_count`, headDim);
  if (ropeDims !== headDim)
    throw new Error(`rope.dimension_count ${ropeDims} differs from head_dim ${headDim}`);
  // Linear and YaRN scaling change the angles too; refuse them rather than compute another model.
  const scaling = metadata.get(`${p}.rope.scaling.type`);
  if (scaling !== undefined && scaling !== "none")
    throw new Error(`unsupported rope scaling ${JSON.stringify(scaling)} (${p}.rope.scaling.type)`);
  if (ropeFreqFactors && ropeFreqFactors.length !== headDim / 2)
    throw new Error(`${GGUF_ROPE_FREQS} has ${ropeFreqFactors.length} values, expected ${headDim / 2}`);
  const layers = num(metadata, `${p}.block_count`);
  const gemma = arch.gemma ? gemmaHyperparameters(metadata, p, { layers, hidden, heads, headDim }) : {};
  return {
    arch,
    layers,
    hidden,
    ffn: num(metadata, `${p}.feed_forward_length`),
    heads,
    kvHeads: num(metadata, `${p}.attention.head_count_kv`, heads),
    headDim,
    vocab: num(metadata, `${p}.vocab_size`, tokenCount),
    contextLength: num(metadata, `${p}.context_length`),
    ropeTheta: num(metadata, `${p}.rope.freq_base`, 10000),
    ropeFreqFactors,
    rmsEps: num(metadata, `${p}.attention.layer_norm_rms_epsilon`),
    attentionScale: 1 / Math.sqrt(headDim),
    ...gemma,
  };
}

/**
 * Gemma 3's attention settings as llama.cpp's gemma3 loader sets them (src/models/gemma3.cpp,
 * llama-hparams.cpp): a sliding window only when the file names one, on every layer but the last
 * of each period of `sliding_window_pattern` (6 unless the file says otherwise, or a per-layer
 * array), local layers rotated with `rope.freq_base_swa` (10,000 unless set); the attention scale
 * 1 / sqrt(head_dim) except for the 62-layer 27B model, 1 / sqrt(hidden / heads).
 */
function gemmaHyperparameters(
  metadata: Map<string, GgufValue>,
  p: string,
  shape: { layers: number; hidden: number; heads: number; headDim: number },
): Pick<Hyperparameters, "attentionScale" | "slidingWindow" | "finalLogitSoftcap"> {
  const window = num(metadata, `${p}.attention.sliding_window`, 0);
  const pattern = metadata.get(`${p}.attention.sliding_window_pattern`);
  let local: boolean[] | undefined;
  if (window > 0) {
    if (Array.isArray(pattern)) {
      if (pattern.length < shape.layers)
        throw new Error(
          `${p}.attention.sliding_window_pattern has ${pattern.length} entries, expected ${shape.layers}`,
        );
      local = pattern.slice(0, shape.layers).map((v) => Boolean(v));
    } else {
      const period = num(metadata, `${p}.attention.sliding_window_pattern`, 6);
      local = Array.from({ length: shape.layers }, (_, l) => period === 0 || l % period < period - 1);
    }
  }
  const softcap = num(metadata, `${p}.final_logit_softcapping`, 0);
  return {
    attentionScale: 1 / Math.sqrt(shape.layers === 62 ? shape.hidden / shape.heads : shape.headDim),
    slidingWindow: local && { window, local, ropeTheta: num(metadata, `${p}.rope.freq_base_swa`, 10000) },
    finalLogitSoftcap: softcap > 0 ? softcap : undefined,
  };
}

/**
 * Llama 3's `rope_scaling` (rope_type "llama3") as per-pair frequency divisors, computed as
 * llama.cpp's converter computes the `rope_freqs` tensor it writes: long wavelengths slowed by
 * `factor`, short ones kept, the band between blended.
 */
export function llama3RopeFreqFactors(
  headDim: number,
  theta: number,
  scaling: { factor: number; lowFreqFactor: number; highFreqFactor: number; originalContext: number },
): Float32Array {
  const { factor, lowFreqFactor, highFreqFactor, originalContext } = scaling;
  const lowFreqWavelen = originalContext / lowFreqFactor;
  const highFreqWavelen = originalContext / highFreqFactor;
  const out = new Float32Array(headDim / 2);
  for (let i = 0; i < headDim / 2; i++) {
    const freq = Math.fround(1 / Math.fround(theta ** Math.fround((2 * i) / headDim)));
    const wavelen = (2 * Math.PI) / freq;
    if (wavelen < highFreqWavelen) out[i] = 1;
    else if (wavelen > lowFreqWavelen) out[i] = factor;
    else {
      const smooth = (originalContext / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / factor + smooth);
    }
  }
  return out;
}

/** config.json's rope_scaling as frequency divisors; only Llama 3's type changes the graph. */
function hfRopeFreqFactors(config: Record<string, unknown>, headDim: number, theta: number) {
  const scaling = config.rope_scaling as Record<string, unknown> | null | undefined;
  if (!scaling) return undefined;
  const type = scaling.rope_type ?? scaling.type;
  if (type === "default") return undefined;
  if (type !== "llama3")
    throw new Error(`unsupported rope_scaling type ${JSON.stringify(type)}; supported: llama3`);
  const get = (key: string, fallback: number) =>
    typeof scaling[key] === "number" ? (scaling[key] as number) : fallback;
  return llama3RopeFreqFactors(headDim, theta, {
    factor: get("factor", 8),
    lowFreqFactor: get("low_freq_factor", 1),
    highFreqFactor: get("high_freq_factor", 4),
    originalContext: get("original_max_position_embeddings", 8192),
  });
}

/**
 * A RoPE base from newer configs' `rope_parameters`: `{rope_theta}`, or per attention kind
 * (`{full_attention: {rope_theta}, sliding_attention: {rope_theta}}`).
 */
function ropeParameter(config: Record<string, unknown>, kind: "full_attention" | "sliding_attention") {
  const params = config.rope_parameters as Record<string, unknown> | null | undefined;
  if (typeof params !== "object" || params === null) return undefined;
  const own = params[kind] as Record<string, unknown> | undefined;
  // A flat `{rope_theta}` is the full-attention base only.
  const source =
    typeof own === "object" && own !== null ? own : kind === "full_attention" ? params : undefined;
  const theta = source?.rope_theta;
  return typeof theta === "number" ? theta : undefined;
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
  const headDim = get("head_dim", hidden / heads);
  const ropeTheta = get("rope_theta", ropeParameter(config, "full_attention") ?? 10000);
  return {
    arch,
    layers: get("num_hidden_layers"),
    hidden,
    ffn: get("intermediate_size"),
    heads,
    kvHeads: get("num_key_value_heads", heads),
    headDim,
    vocab: get("vocab_size"),
    contextLength: get("max_position_embeddings"),
    ropeTheta,
    ropeFreqFactors: hfRopeFreqFactors(config, headDim, ropeTheta),
    rmsEps: get("rms_norm_eps"),
    attentionScale: 1 / Math.sqrt(headDim),
    ...(arch.gemma ? gemmaFromHfConfig(config, get, headDim) : {}),
  };
}

/**
 * Gemma 3's attention settings from its config.json (Gemma3TextConfig): the layers' kinds from
 * `layer_types` (else every `sliding_window_pattern`-th layer global, 6 by default), the local
 * base `rope_local_base_freq`, the scale query_pre_attn_scalar^-0.5, final_logit_softcapping.
 */
function gemmaFromHfConfig(
  config: Record<string, unknown>,
  get: (key: string, fallback?: number) => number,
  headDim: number,
): Pick<Hyperparameters, "attentionScale" | "slidingWindow" | "finalLogitSoftcap"> {
  const layers = get("num_hidden_layers");
  const window = typeof config.sliding_window === "number" ? config.sliding_window : 0;
  const types = config.layer_types;
  let local: boolean[];
  if (Array.isArray(types)) {
    if (types.length !== layers)
      throw new Error(`config.json layer_types has ${types.length} entries, expected ${layers}`);
    local = types.map((t) => t === "sliding_attention");
  } else {
    const period = get("sliding_window_pattern", 6);
    local = Array.from({ length: layers }, (_, l) => (l + 1) % period !== 0);
  }
  const softcap = config.final_logit_softcapping;
  return {
    attentionScale: 1 / Math.sqrt(get("query_pre_attn_scalar", headDim)),
    slidingWindow:
      window > 0 && local.some(Boolean)
        ? {
            window,
            local,
            ropeTheta: get("rope_local_base_freq", ropeParameter(config, "sliding_attention") ?? 10000),
          }
        : undefined,
    finalLogitSoftcap: typeof softcap === "number" && softcap > 0 ? softcap : undefined,
  };
}
