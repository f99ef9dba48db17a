/**
 * The decoder graph's weights from any tensor source, by a table of tensor names: GGUF files
 * (gguf-weights.ts) and Hugging Face safetensors (safetensors-weights.ts) differ only in their
 * source and their names, so stacking (QKV, gate/up), packing and the embedding rule live here once.
 */
import type { ArchitectureSpec } from "./architectures.ts";
import type { HalfFormat, LinearWeight, WeightProvider } from "./decoder-graph.ts";
import { concatNBits, type NBitsWeight, widenTo8 } from "./quantized-weights.ts";

export type WeightFormat = "q4" | "fp32";

/** Where tensors come from. `heads`: Q/K rows, to be returned in half-rotation RoPE order. */
export interface TensorSource {
  /** n output rows by k inputs of a 2-D weight; undefined when the source lacks it. */
  shape(name: string): { n: number; k: number } | undefined;
  floats(name: string, heads?: number): Float32Array;
  /** Packed MatMulNBits blocks (4-bit where the source allows, else 8-bit). */
  nbits(name: string, heads?: number): NBitsWeight;
  /**
   * Whether a q4 model keeps this tensor as a float one (a float tensor in the file: quantizing
   * it would not be exact): in its own 16 bits where halfFormat names them, else float32. Absent: never.
   */
  keptAsFloats?(name: string): boolean;
  /** floats(), for a q4 model that keeps them (the source records it). */
  keptFloats?(name: string, heads?: number): Float32Array;
  /** The 16-bit float format a kept tensor is stored in (float16, bfloat16), else undefined. */
  halfFormat?(name: string): HalfFormat | undefined;
  /** A kept 16-bit tensor's own bits (a q4 model keeps them so: the kernels read them as they are). */
  keptHalves?(name: string, heads?: number): Uint16Array;
  /** A 1-D tensor (norm weights, biases); `heads` as for Q/K rows. */
  vector(name: string, heads?: number): Float32Array;
}

/** Tensor names of one naming scheme. */
export interface TensorNames {
  embedding: string;
  /** The output projection, absent when tied to the embedding. */
  output: string;
  outputNorm: string;
  q(layer: number): string;
  k(layer: number): string;
  v(layer: number): string;
  attnOutput(layer: number): string;
  gate(layer: number): string;
  up(layer: number): string;
  down(layer: number): string;
  attnNorm(layer: number): string;
  ffnNorm(layer: number): string;
  /** The RMSNorms after attention and after the MLP (gemma3's sandwich norms), where the scheme has them. */
  attnPostNorm?(layer: number): string;
  ffnPostNorm?(layer: number): string;
  /** Q/K/V biases (qwen2). */
  qBias(layer: number): string;
  kBias(layer: number): string;
  vBias(layer: number): string;
  /** Per-head RMSNorm weights on Q and K (qwen3). */
  qNorm(layer: number): string;
  kNorm(layer: number): string;
}

export class TableWeightProvider implements WeightProvider {
  private readonly source: TensorSource;
  private readonly names: TensorNames;
  private readonly format: WeightFormat;
  private readonly heads: number;
  private readonly kvHeads: number;
  private readonly arch: ArchitectureSpec;
  private readonly normOffset: number;

  /** `normOffset`: added to every RMSNorm weight (1 for Gemma checkpoints, which store weight - 1). */
  constructor(
    source: TensorSource,
    names: TensorNames,
    hp: { heads: number; kvHeads: number; arch: ArchitectureSpec },
    format: WeightFormat,
    normOffset = 0,
  ) {
    this.source = source;
    this.normOffset = normOffset;
    this.names = names;
    this.format = format;
    this.heads = hp.heads;
    this.kvHeads = hp.kvHeads;
    this.arch = hp.arch;
  }

  private shape(name: string): { n: number; k: number } {
    const s = this.source.shape(name);
    if (!s) throw new Error(`the weights lack tensor ${name}`);
    return s;
  }

  /** Several tensors stacked along the output dimension. */
  private stacked(parts: { name: string; heads?: number }[]): LinearWeight {
    const shapes = parts.map((p) => this.shape(p.name));
    // A q4 stack with a float part stays float throughout: 16-bit when every part is of one 16-bit
    // format, else float32 (the other parts widened, exactly).
    const keptAsFloats = this.format === "q4" && parts.some((p) => this.source.keptAsFloats?.(p.name));
    if (this.format === "q4" && !keptAsFloats) {
      const packed = parts.map((p) => this.source.nbits(p.name, p.heads));
      return { kind: "nbits", weight: packed.length === 1 ? packed[0]! : concatNBits(packed) };
    }
    const halves = keptAsFloats ? this.halves(parts) : undefined;
    if (halves) return halves;
    const floats = parts.map((p) =>
      keptAsFloats && this.source.keptFloats
        ? this.source.keptFloats(p.name, p.heads)
        : this.source.floats(p.name, p.heads),
    );
    const values = new Float32Array(floats.reduce((s, f) => s + f.length, 0));
    let at = 0;
    for (const f of floats) {
      values.set(f, at);
      at += f.length;
    }
    return { kind: "f32", n: shapes.reduce((s, r) => s + r.n, 0), k: shapes[0]!.k, values };
  }

  /** The stack in 16 bits, when every part is stored in the same 16-bit float format. */
  private halves(parts: { name: string; heads?: number }[]): LinearWeight | undefined {
    const format = this.source.halfFormat?.(parts[0]!.name);
    if (!format || !this.source.keptHalves || parts.some((p) => this.source.halfFormat?.(p.name) !== format))
      return undefined;
    const kept = parts.map((p) => this.source.keptHalves!(p.name, p.heads));
    const values = new Uint16Array(kept.reduce((s, h) => s + h.length, 0));
    let at = 0;
    for (const h of kept) {
      values.set(h, at);
      at += h.length;
    }
    const n = parts.reduce((s, p) => s + this.shape(p.name).n, 0);
    return { kind: "half", format, n, k: this.shape(parts[0]!.name).k, values };
  }

  embedding(): LinearWeight {
    const name = this.names.embedding;
    const r = this.shape(name);
    if (this.format === "fp32") return { kind: "f32", n: r.n, k: r.k, values: this.source.floats(name) };
    if (this.source.keptAsFloats?.(name)) {
      const format = this.source.halfFormat?.(name);
      if (format && this.source.keptHalves)
        return { kind: "half", format, n: r.n, k: r.k, values: this.source.keptHalves(name) };
      if (this.source.keptFloats)
        return { kind: "f32", n: r.n, k: r.k, values: this.source.keptFloats(name) };
    }
    // The table is gathered row by row and dequantized in the graph, which reads 8-bit blocks
    // only: 4-bit ones are widened (exactly).
    return { kind: "nbits", weight: widenTo8(this.source.nbits(name)) };
  }

  lmHead(): LinearWeight | undefined {
    return this.source.shape(this.names.output) ? this.stacked([{ name: this.names.output }]) : undefined;
  }

  qkv(layer: number): LinearWeight {
    const n = this.names;
    return this.stacked([
      { name: n.q(layer), heads: this.heads },
      { name: n.k(layer), heads: this.kvHeads },
      { name: n.v(layer) },
    ]);
  }

  qkvBias(layer: number): Float32Array | undefined {
    if (!this.arch.qkvBias) return undefined;
    const n = this.names;
    const parts = [
      this.source.vector(n.qBias(layer), this.heads),
      this.source.vector(n.kBias(layer), this.kvHeads),
      this.source.vector(n.vBias(layer)),
    ];
    const out = new Float32Array(parts.reduce((s, p) => s + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  qkNorm(layer: number): { q: Float32Array; k: Float32Array } | undefined {
    if (!this.arch.qkNorm) return undefined;
    return { q: this.normWeight(this.names.qNorm(layer)), k: this.normWeight(this.names.kNorm(layer)) };
  }

  private normWeight(name: string): Float32Array {
    const w = this.source.vector(name);
    return this.normOffset === 0 ? w : w.map((x) => x + this.normOffset);
  }

  attnOutput(layer: number): LinearWeight {
    return this.stacked([{ name: this.names.attnOutput(layer) }]);
  }

  gateUp(layer: number): LinearWeight {
    return this.stacked([{ name: this.names.gate(layer) }, { name: this.names.up(layer) }]);
  }

  down(layer: number): LinearWeight {
    return this.stacked([{ name: this.names.down(layer) }]);
  }

  norm(which: "attn" | "ffn", layer: number): Float32Array {
    return this.normWeight(which === "attn" ? this.names.attnNorm(layer) : this.names.ffnNorm(layer));
  }

  postNorm(which: "attn" | "ffn", layer: number): Float32Array {
    const name = which === "attn" ? this.names.attnPostNorm : this.names.ffnPostNorm;
    if (!name) throw new Error("these weights' tensor names have no post-attention or post-MLP norms");
    return this.normWeight(name(layer));
  }

  outputNorm(): Float32Array {
    return this.normWeight(this.names.outputNorm);
  }
}
