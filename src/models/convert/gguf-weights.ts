/**
 * Llama-family weights out of a GGUF file: llama.cpp's tensor names, its quant blocks mapped onto
 * MatMulNBits where they map exactly, and its Q/K row permutation undone.
 */
import type { GgufFile } from "../gguf/reader.ts";
import { GgmlType, type GgufTensorInfo } from "../gguf/types.ts";
import type { Hyperparameters } from "./architectures.ts";
import type { HalfFormat } from "./decoder-graph.ts";
import type { QuantReport } from "./quant-report.ts";
import { type NBitsWeight, packNBits, unpermuteLlamaRows } from "./quantized-weights.ts";
import {
  TableWeightProvider,
  type TensorNames,
  type TensorSource,
  type WeightFormat,
} from "./table-weights.ts";

export type { WeightFormat };

export const GGUF_TENSOR_NAMES: TensorNames = {
  embedding: "token_embd.weight",
  output: "output.weight",
  outputNorm: "output_norm.weight",
  q: (l) => `blk.${l}.attn_q.weight`,
  k: (l) => `blk.${l}.attn_k.weight`,
  v: (l) => `blk.${l}.attn_v.weight`,
  attnOutput: (l) => `blk.${l}.attn_output.weight`,
  gate: (l) => `blk.${l}.ffn_gate.weight`,
  up: (l) => `blk.${l}.ffn_up.weight`,
  down: (l) => `blk.${l}.ffn_down.weight`,
  attnNorm: (l) => `blk.${l}.attn_norm.weight`,
  ffnNorm: (l) => `blk.${l}.ffn_norm.weight`,
  attnPostNorm: (l) => `blk.${l}.post_attention_norm.weight`,
  ffnPostNorm: (l) => `blk.${l}.post_ffw_norm.weight`,
  qBias: (l) => `blk.${l}.attn_q.bias`,
  kBias: (l) => `blk.${l}.attn_k.bias`,
  vBias: (l) => `blk.${l}.attn_v.bias`,
  qNorm: (l) => `blk.${l}.attn_q_norm.weight`,
  kNorm: (l) => `blk.${l}.attn_k_norm.weight`,
};

/** How weights without an exact mapping are treated, and where what was done is recorded. */
export interface QuantPolicy {
  allowRequantize?: boolean;
  q8kActivations?: boolean;
  report?: QuantReport;
}

class GgufTensorSource implements TensorSource {
  private readonly file: GgufFile;
  private readonly unpermuteQk: boolean;
  private readonly policy: QuantPolicy;

  constructor(file: GgufFile, unpermuteQk: boolean, policy: QuantPolicy) {
    this.file = file;
    this.unpermuteQk = unpermuteQk;
    this.policy = policy;
  }

  private info(name: string): GgufTensorInfo {
    const info = this.file.tensor(name);
    if (!info) throw new Error(`GGUF file lacks tensor ${name}`);
    return info;
  }

  shape(name: string): { n: number; k: number } | undefined {
    const info = this.file.tensor(name);
    if (!info) return undefined;
    if (info.dims.length !== 2) throw new Error(`tensor ${name} has ${info.dims.length} dims, expected 2`);
    return { k: info.dims[0]!, n: info.dims[1]! };
  }

  floats(name: string, heads?: number): Float32Array {
    const values = this.file.dequantize(this.info(name));
    if (!(heads && this.unpermuteQk)) return values;
    const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    const moved = unpermuteLlamaRows(bytes, this.shape(name)!.n, heads);
    return new Float32Array(moved.buffer, moved.byteOffset, values.length);
  }

  nbits(name: string, heads?: number): NBitsWeight {
    const info = this.info(name);
    const { n, k } = this.shape(name)!;
    const raw = this.file.readTensorBytes(info);
    const bytes = heads && this.unpermuteQk ? unpermuteLlamaRows(raw, n, heads) : raw;
    const { weight, exact } = packNBits(info.type, bytes, n, k, () => this.floats(name, heads), {
      name,
      allowRequantize: this.policy.allowRequantize,
      q8kActivations: this.policy.q8kActivations,
    });
    this.policy.report?.add(info.type, exact, weight);
    return weight;
  }

  keptAsFloats(name: string): boolean {
    const type = this.info(name).type;
    return type === GgmlType.F32 || type === GgmlType.F16 || type === GgmlType.BF16;
  }

  keptFloats(name: string, heads?: number): Float32Array {
    const values = this.floats(name, heads);
    const { n, k } = this.shape(name)!;
    this.policy.report?.addFloats(this.info(name).type, n, k);
    return values;
  }

  halfFormat(name: string): HalfFormat | undefined {
    const type = this.info(name).type;
    return type === GgmlType.F16 ? "f16" : type === GgmlType.BF16 ? "bf16" : undefined;
  }

  keptHalves(name: string, heads?: number): Uint16Array {
    const info = this.info(name);
    const { n, k } = this.shape(name)!;
    const raw = this.file.readTensorBytes(info);
    const bytes = heads && this.unpermuteQk ? unpermuteLlamaRows(raw, n, heads) : raw;
    this.policy.report?.addHalves(info.type, n, k);
    // A copy: the file's bytes need not be 2-byte aligned.
    return new Uint16Array(new Uint8Array(bytes).buffer, 0, n * k);
  }

  vector(name: string, heads?: number): Float32Array {
    const values = this.file.dequantize(this.info(name));
    if (!(heads && this.unpermuteQk)) return values;
    const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    const moved = unpermuteLlamaRows(bytes, values.length, heads);
    return new Float32Array(moved.buffer, moved.byteOffset, values.length);
  }
}

export function ggufWeightProvider(
  file: GgufFile,
  hp: Hyperparameters,
  format: WeightFormat,
  policy: QuantPolicy = {},
): TableWeightProvider {
  return new TableWeightProvider(
    new GgufTensorSource(file, hp.arch.unpermuteQk, policy),
    GGUF_TENSOR_NAMES,
    hp,
    format,
  );
}
