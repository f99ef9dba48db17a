/** config.json and generation_config.json in the Hugging Face layout, from converted hyperparameters. */
import type { Hyperparameters } from "./architectures.ts";
import type { WeightFormat } from "./gguf-weights.ts";

export interface SpecialTokenIds {
  bosId?: number;
  eosIds: number[];
  padId?: number;
}

export { onnxFileName } from "../../core/model/model-files.ts";

export function buildModelConfig(
  hp: Hyperparameters,
  ids: SpecialTokenIds,
  tied: boolean,
  formats: WeightFormat[],
): Record<string, unknown> {
  return {
    architectures: [hp.arch.hfArchitecture],
    model_type: hp.arch.modelType,
    hidden_size: hp.hidden,
    intermediate_size: hp.ffn,
    num_hidden_layers: hp.layers,
    num_attention_heads: hp.heads,
    num_key_value_heads: hp.kvHeads,
    head_dim: hp.headDim,
    vocab_size: hp.vocab,
    max_position_embeddings: hp.contextLength,
    rms_norm_eps: hp.rmsEps,
    rope_theta: hp.ropeTheta,
    // Debt: Llama 3's rope_scaling is not written (the GGUF holds only its frequency factors), so a
    // checkpoint imported against such a model without a config.json of its own loses it.
    hidden_act: hp.arch.gemma ? "gelu_pytorch_tanh" : "silu",
    ...(hp.arch.gemma && gemmaConfig(hp)),
    tie_word_embeddings: tied,
    bos_token_id: ids.bosId ?? null,
    eos_token_id: ids.eosIds.length === 1 ? ids.eosIds[0] : ids.eosIds,
    pad_token_id: ids.padId ?? null,
    torch_dtype: "float32",
    "transformers.js_config": {
      // Weights live in onnx/<file>_data next to each graph.
      use_external_data_format: true,
      dtype: formats.includes("q4") ? "q4" : "fp32",
    },
  };
}

/**
 * Gemma 3's attention settings as its config.json names them, so a checkpoint imported against
 * this model without a config of its own (convert-safetensors.ts) gets the same graph.
 */
function gemmaConfig(hp: Hyperparameters): Record<string, unknown> {
  const window = hp.slidingWindow;
  return {
    query_pre_attn_scalar: Math.round(1 / hp.attentionScale ** 2),
    sliding_window: window?.window ?? null,
    layer_types: Array.from({ length: hp.layers }, (_, l) =>
      window?.local[l] ? "sliding_attention" : "full_attention",
    ),
    rope_local_base_freq: window?.ropeTheta ?? hp.ropeTheta,
    final_logit_softcapping: hp.finalLogitSoftcap ?? null,
  };
}

export function buildGenerationConfig(ids: SpecialTokenIds): Record<string, unknown> {
  return {
    bos_token_id: ids.bosId ?? null,
    eos_token_id: ids.eosIds.length === 1 ? ids.eosIds[0] : ids.eosIds,
    pad_token_id: ids.padId ?? null,
  };
}
