/**
 * Weights out of Hugging Face safetensors (a training run's checkpoint): the transformers tensor
 * names, which the llama, qwen2 and qwen3 rows share (gemma3 renames its norms), float weights (F32/F16/BF16) quantized here
 * for format q4 (Q4_1 blocks for the projections, like the default model's, mapped exactly onto
 * MatMulNBits). Q/K rows are already in half-rotation order.
 */

import { quantize } from "../gguf/quantize.ts";
import { GgmlType } from "../gguf/types.ts";
import type { SafetensorsSet } from "../safetensors/reader.ts";
import type { Hyperparameters } from "./architectures.ts";
import { type NBitsWeight, packNBits } from "./quantized-weights.ts";
import {
  TableWeightProvider,
  type TensorNames,
  type TensorSource,
  type WeightFormat,
} from "./table-weights.ts";

export const HF_LLAMA_TENSOR_NAMES: TensorNames = {
  embedding: "model.embed_tokens.weight",
  output: "lm_head.weight",
  outputNorm: "model.norm.weight",
  q: (l) => `model.layers.${l}.self_attn.q_proj.weight`,
  k: (l) => `model.layers.${l}.self_attn.k_proj.weight`,
  v: (l) => `model.layers.${l}.self_attn.v_proj.weight`,
  attnOutput: (l) => `model.layers.${l}.self_attn.o_proj.weight`,
  gate: (l) => `model.layers.${l}.mlp.gate_proj.weight`,
  up: (l) => `model.layers.${l}.mlp.up_proj.weight`,
  down: (l) => `model.layers.${l}.mlp.down_proj.weight`,
  attnNorm: (l) => `model.layers.${l}.input_layernorm.weight`,
  ffnNorm: (l) => `model.layers.${l}.post_attention_layernorm.weight`,
  qBias: (l) => `model.layers.${l}.self_attn.q_proj.bias`,
  kBias: (l) => `model.layers.${l}.self_attn.k_proj.bias`,
  vBias: (l) => `model.layers.${l}.self_attn.v_proj.bias`,
  qNorm: (l) => `model.layers.${l}.self_attn.q_norm.weight`,
  kNorm: (l) => `model.layers.${l}.self_attn.k_norm.weight`,
};

/**
 * Gemma 3's names: the norm after attention is its `post_attention_layernorm` (llama's name for
 * the norm before the MLP, which Gemma calls `pre_feedforward_layernorm`).
 */
export const HF_GEMMA3_TENSOR_NAMES: TensorNames = {
  ...HF_LLAMA_TENSOR_NAMES,
  ffnNorm: (l) => `model.layers.${l}.pre_feedforward_layernorm.weight`,
  attnPostNorm: (l) => `model.layers.${l}.post_attention_layernorm.weight`,
  ffnPostNorm: (l) => `model.layers.${l}.post_feedforward_layernorm.weight`,
};

class SafetensorsSource implements TensorSource {
  private readonly set: SafetensorsSet;
  /** Trainers save tied weights once (or both copies): lm_head is absent or equal to the embedding. */
  private readonly tied: boolean;

  constructor(set: SafetensorsSet, tied: boolean) {
    this.set = set;
    this.tied = tied;
  }

  private info(name: string) {
    const info = this.set.tensor(name);
    if (!info) throw new Error(`the safetensors lack tensor ${name}`);
    return info;
  }

  shape(name: string): { n: number; k: number } | undefined {
    if (this.tied && name === HF_LLAMA_TENSOR_NAMES.output) return undefined;
    const info = this.set.tensor(name);
    if (!info) return undefined;
    if (info.shape.length !== 2) throw new Error(`tensor ${name} has ${info.shape.length} dims, expected 2`);
    return { n: info.shape[0]!, k: info.shape[1]! };
  }

  floats(name: string): Float32Array {
    return this.set.floats(this.info(name));
  }

  nbits(name: string): NBitsWeight {
    const { n, k } = this.shape(name)!;
    const values = this.floats(name);
    return packNBits(GgmlType.Q4_1, quantize(GgmlType.Q4_1, values), n, k, () => values, { name }).weight;
  }

  vector(name: string): Float32Array {
    return this.floats(name);
  }
}

export function safetensorsWeightProvider(
  set: SafetensorsSet,
  hp: Hyperparameters,
  tied: boolean,
  format: WeightFormat,
): TableWeightProvider {
  // Gemma's RMSNorm multiplies by (1 + weight) in float32; GGUF files store the sum, as the graph reads it.
  return hp.arch.gemma
    ? new TableWeightProvider(new SafetensorsSource(set, tied), HF_GEMMA3_TENSOR_NAMES, hp, format, 1)
    : new TableWeightProvider(new SafetensorsSource(set, tied), HF_LLAMA_TENSOR_NAMES, hp, format);
}
