/**
 * Reads llama-family weights out of a GGUF file in the form the decoder graph stores them: packed
 * MatMulNBits blocks (format "q4") or float rows (format "fp32").
 */
import type { GgufFile } from "../gguf/reader.ts";
import type { GgufTensorInfo } from "../gguf/types.ts";
import type { Hyperparameters } from "./architectures.ts";
import type { LinearWeight, WeightProvider } from "./decoder-graph.ts";
import {
  concatNBits,
  type NBitsWeight,
  packNBits,
  quantize8,
  unpermuteLlamaRows,
} from "./quantized-weights.ts";

export type WeightFormat = "q4" | "fp32";

interface Rows {
  info: GgufTensorInfo;
  n: number;
  k: number;
}

export class GgufWeightProvider implements WeightProvider {
  private readonly file: GgufFile;
  private readonly hp: Hyperparameters;
  private readonly format: WeightFormat;

  constructor(file: GgufFile, hp: Hyperparameters, format: WeightFormat) {
    this.file = file;
    this.hp = hp;
    this.format = format;
  }

  private rows(name: string): Rows {
    const info = this.file.tensor(name);
    if (!info) throw new Error(`GGUF file lacks tensor ${name}`);
    if (info.dims.length !== 2) throw new Error(`tensor ${name} has ${info.dims.length} dims, expected 2`);
    return { info, k: info.dims[0]!, n: info.dims[1]! };
  }

  /** Raw rows, with the llama Q/K permutation undone when `heads` is given. */
  private rawBytes(r: Rows, heads?: number): Uint8Array {
    const bytes = this.file.readTensorBytes(r.info);
    return heads && this.hp.arch.unpermuteQk ? unpermuteLlamaRows(bytes, r.n, heads) : bytes;
  }

  private floats(r: Rows, heads?: number): Float32Array {
    const values = this.file.dequantize(r.info);
    if (!(heads && this.hp.arch.unpermuteQk)) return values;
    const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    const moved = unpermuteLlamaRows(bytes, r.n, heads);
    return new Float32Array(moved.buffer, moved.byteOffset, values.length);
  }

  private nbits(r: Rows, heads?: number): NBitsWeight {
    return packNBits(r.info.type, this.rawBytes(r, heads), r.n, r.k, () => this.floats(r, heads));
  }

  /** Several GGUF tensors stacked along the output dimension. */
  private stacked(parts: { name: string; heads?: number }[]): LinearWeight {
    const rows = parts.map((p) => this.rows(p.name));
    if (this.format === "q4") {
      const packed = parts.map((p, i) => this.nbits(rows[i]!, p.heads));
      return { kind: "nbits", weight: packed.length === 1 ? packed[0]! : concatNBits(packed) };
    }
    const floats = parts.map((p, i) => this.floats(rows[i]!, p.heads));
    const values = new Float32Array(floats.reduce((s, f) => s + f.length, 0));
    let at = 0;
    for (const f of floats) {
      values.set(f, at);
      at += f.length;
    }
    return { kind: "f32", n: rows.reduce((s, r) => s + r.n, 0), k: rows[0]!.k, values };
  }

  embedding(): LinearWeight {
    const r = this.rows("token_embd.weight");
    if (this.format === "fp32") return { kind: "f32", n: r.n, k: r.k, values: this.floats(r) };
    // The table is gathered row by row and dequantized in the graph, which reads 8-bit blocks only.
    const packed = this.nbits(r);
    const weight = packed.bits === 8 && !packed.offsets ? packed : quantize8(this.floats(r), r.n, r.k);
    return { kind: "nbits", weight };
  }

  lmHead(): LinearWeight | undefined {
    return this.file.tensor("output.weight") ? this.stacked([{ name: "output.weight" }]) : undefined;
  }

  qkv(layer: number): LinearWeight {
    const b = `blk.${layer}`;
    return this.stacked([
      { name: `${b}.attn_q.weight`, heads: this.hp.heads },
      { name: `${b}.attn_k.weight`, heads: this.hp.kvHeads },
      { name: `${b}.attn_v.weight` },
    ]);
  }

  attnOutput(layer: number): LinearWeight {
    return this.stacked([{ name: `blk.${layer}.attn_output.weight` }]);
  }

  gateUp(layer: number): LinearWeight {
    return this.stacked([{ name: `blk.${layer}.ffn_gate.weight` }, { name: `blk.${layer}.ffn_up.weight` }]);
  }

  down(layer: number): LinearWeight {
    return this.stacked([{ name: `blk.${layer}.ffn_down.weight` }]);
  }

  private vector(name: string): Float32Array {
    const info = this.file.tensor(name);
    if (!info) throw new Error(`GGUF file lacks tensor ${name}`);
    return this.file.dequantize(info);
  }

  norm(which: "attn" | "ffn", layer: number): Float32Array {
    return this.vector(`blk.${layer}.${which}_norm.weight`);
  }

  outputNorm(): Float32Array {
    return this.vector("output_norm.weight");
  }
}
