/**
 * An independent llama forward pass in float64, computed the way llama.cpp does it: weights in
 * GGUF row order and consecutive-pair ("normal") RoPE. Agreement with the converted ONNX model
 * (half-rotation RoPE on un-permuted rows) checks the permutation, RoPE, GQA and norms at once.
 */
import type { GgufFile } from "../../src/models/gguf/reader.ts";

interface Layer {
  attnNorm: Float32Array;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  o: Float32Array;
  ffnNorm: Float32Array;
  gate: Float32Array;
  up: Float32Array;
  down: Float32Array;
}

export interface ReferenceConfig {
  layers: number;
  hidden: number;
  ffn: number;
  heads: number;
  kvHeads: number;
  ropeTheta: number;
  rmsEps: number;
  vocab: number;
}

function matVec(w: Float32Array, x: Float64Array, n: number, k: number): Float64Array {
  const y = new Float64Array(n);
  for (let r = 0; r < n; r++) {
    let s = 0;
    for (let c = 0; c < k; c++) s += w[r * k + c]! * x[c]!;
    y[r] = s;
  }
  return y;
}

function rmsNorm(x: Float64Array, w: Float32Array, eps: number): Float64Array {
  let ss = 0;
  for (const v of x) ss += v * v;
  const inv = 1 / Math.sqrt(ss / x.length + eps);
  return x.map((v, i) => v * inv * w[i]!);
}

/** Rotates consecutive pairs (2i, 2i+1) of each head by pos * theta^(-2i/hd). */
function ropeNormal(x: Float64Array, heads: number, hd: number, pos: number, theta: number): void {
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < hd / 2; i++) {
      const angle = pos * theta ** ((-2 * i) / hd);
      const a = x[h * hd + 2 * i]!;
      const b = x[h * hd + 2 * i + 1]!;
      x[h * hd + 2 * i] = a * Math.cos(angle) - b * Math.sin(angle);
      x[h * hd + 2 * i + 1] = a * Math.sin(angle) + b * Math.cos(angle);
    }
}

export class ReferenceLlama {
  private readonly c: ReferenceConfig;
  private readonly embed: Float32Array;
  private readonly outNorm: Float32Array;
  private readonly layerWeights: Layer[];

  constructor(file: GgufFile, c: ReferenceConfig) {
    this.c = c;
    const t = (name: string) => {
      const info = file.tensor(name);
      if (!info) throw new Error(`missing ${name}`);
      return file.dequantize(info);
    };
    this.embed = t("token_embd.weight");
    this.outNorm = t("output_norm.weight");
    this.layerWeights = Array.from({ length: c.layers }, (_, l) => ({
      attnNorm: t(`blk.${l}.attn_norm.weight`),
      q: t(`blk.${l}.attn_q.weight`),
      k: t(`blk.${l}.attn_k.weight`),
      v: t(`blk.${l}.attn_v.weight`),
      o: t(`blk.${l}.attn_output.weight`),
      ffnNorm: t(`blk.${l}.ffn_norm.weight`),
      gate: t(`blk.${l}.ffn_gate.weight`),
      up: t(`blk.${l}.ffn_up.weight`),
      down: t(`blk.${l}.ffn_down.weight`),
    }));
  }

  /** Logits for every position of `tokens` (full causal attention, no cache). */
  forward(tokens: number[]): Float64Array[] {
    const { hidden: H, heads, kvHeads, ffn, rmsEps, ropeTheta } = this.c;
    const hd = H / heads;
    const group = heads / kvHeads;
    let xs = tokens.map((t) => Float64Array.from(this.embed.subarray(t * H, (t + 1) * H)));
    for (const w of this.layerWeights) {
      const normed = xs.map((x) => rmsNorm(x, w.attnNorm, rmsEps));
      const qs = normed.map((x, p) => {
        const q = matVec(w.q, x, H, H);
        ropeNormal(q, heads, hd, p, ropeTheta);
        return q;
      });
      const ks = normed.map((x, p) => {
        const k = matVec(w.k, x, kvHeads * hd, H);
        ropeNormal(k, kvHeads, hd, p, ropeTheta);
        return k;
      });
      const vs = normed.map((x) => matVec(w.v, x, kvHeads * hd, H));
      xs = xs.map((x, p) => {
        const attn = new Float64Array(H);
        for (let h = 0; h < heads; h++) {
          const kv = Math.floor(h / group);
          const scores = [];
          for (let t = 0; t <= p; t++) {
            let s = 0;
            for (let d = 0; d < hd; d++) s += qs[p]![h * hd + d]! * ks[t]![kv * hd + d]!;
            scores.push(s / Math.sqrt(hd));
          }
          const m = Math.max(...scores);
          const e = scores.map((s) => Math.exp(s - m));
          const z = e.reduce((a, b) => a + b, 0);
          for (let t = 0; t <= p; t++)
            for (let d = 0; d < hd; d++) attn[h * hd + d]! += (e[t]! / z) * vs[t]![kv * hd + d]!;
        }
        const o = matVec(w.o, attn, H, H);
        const r = x.map((v, i) => v + o[i]!);
        const n2 = rmsNorm(r, w.ffnNorm, rmsEps);
        const g = matVec(w.gate, n2, ffn, H);
        const u = matVec(w.up, n2, ffn, H);
        const act = g.map((v, i) => (v / (1 + Math.exp(-v))) * u[i]!);
        const down = matVec(w.down, act, H, ffn);
        return r.map((v, i) => v + down[i]!);
      });
    }
    return xs.map((x) => matVec(this.embed, rmsNorm(x, this.outNorm, rmsEps), this.c.vocab, H));
  }
}
