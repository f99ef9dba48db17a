/**
 * A 7B-shaped qwen2 GGUF with random weights, for measuring decode at a size no real weights here
 * reach: DeepSeek-R1-Distill-Qwen-7B's shapes (28 layers, hidden 3584, FFN 18,944, 28 heads, 4 KV
 * heads, vocabulary 152,064) stored as llama.cpp's Q4_K_M stores them — Q4_K everywhere, Q6_K for
 * the output head and for attn_v / ffn_down on the layers llama.cpp's `use_more_bits` picks.
 * Decode speed does not depend on the values, so every block is random bits with scales that keep
 * activations finite. The tokenizer is a real one (a Qwen2.5 GGUF's, padded to the vocabulary as
 * llama.cpp's converter pads: `[PADn]`, type unused), so prompts tokenize as they would on the
 * real model. ~4.4 GB; tensors are made one at a time while written, never all in memory.
 *
 *   node bench/synthetic-7b.ts [--out ~/.cache/ortserve/gguf/synthetic-qwen2-7b-q4_k_m.gguf]
 *                              [--tokenizer-from ~/.cache/ortserve/gguf/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf]
 */
import { randomFillSync } from "node:crypto";
import { existsSync, statfsSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { float32ToFp16 } from "../src/models/gguf/half.ts";
import { openGguf } from "../src/models/gguf/reader.ts";
import {
  GgmlType,
  type GgmlTypeId,
  type GgufMetadataEntry,
  GgufValueType as U,
} from "../src/models/gguf/types.ts";
import { type GgufTensorInput, metadataEntry, writeGguf } from "../src/models/gguf/writer.ts";
import { ggufCacheDir } from "../src/util/paths.ts";

/** DeepSeek-R1-Distill-Qwen-7B's config.json. */
export const SHAPE_7B = {
  layers: 28,
  hidden: 3584,
  ffn: 18944,
  heads: 28,
  kvHeads: 4,
  vocab: 152064,
  contextLength: 131072,
  ropeTheta: 10000,
  rmsEps: 1e-6,
};
export type Shape = typeof SHAPE_7B;

const Q4_K_BLOCK = 144;
const Q6_K_BLOCK = 210;
const QK_K = 256;

/** llama.cpp's use_more_bits (src/llama-quant.cpp): the layers Q4_K_M gives Q6_K attn_v / ffn_down. */
export function usesMoreBits(layer: number, layers: number): boolean {
  const eighth = Math.floor(layers / 8);
  return layer < eighth || layer >= 7 * eighth || (layer - eighth) % 3 === 2;
}

/**
 * Random Q4_K blocks: random quants, 6-bit scales and mins; d and dmin chosen so weights come out
 * roughly zero-mean with a spread of ~0.02 (dmin = 7.5 d cancels the mean of d·scale·q).
 */
function randomQ4K(rows: number, cols: number): Uint8Array {
  const out = new Uint8Array((rows * cols * Q4_K_BLOCK) / QK_K);
  randomFillSync(out);
  const d = float32ToFp16(1.2e-4);
  const dmin = float32ToFp16(9e-4);
  for (let b = 0; b < out.length; b += Q4_K_BLOCK) {
    out[b] = d & 0xff;
    out[b + 1] = d >> 8;
    out[b + 2] = dmin & 0xff;
    out[b + 3] = dmin >> 8;
  }
  return out;
}

/** Random Q6_K blocks: random 6-bit quants, 8-bit scales in -16..15, d for a spread of ~0.02. */
function randomQ6K(rows: number, cols: number): Uint8Array {
  const out = new Uint8Array((rows * cols * Q6_K_BLOCK) / QK_K);
  randomFillSync(out);
  const d = float32ToFp16(1e-4);
  for (let b = 0; b < out.length; b += Q6_K_BLOCK) {
    for (let s = b + 192; s < b + 208; s++) out[s] = ((out[s]! & 0x1f) - 16) & 0xff;
    out[b + 208] = d & 0xff;
    out[b + 209] = d >> 8;
  }
  return out;
}

function f32(values: number[] | Float32Array): Uint8Array {
  return new Uint8Array(Float32Array.from(values).buffer);
}

/** The tensors of a Q4_K_M-shaped qwen2 model, each made when the writer reaches it. */
export function syntheticTensors(s: Shape): GgufTensorInput[] {
  const headDim = s.hidden / s.heads;
  const kvDim = s.kvHeads * headDim;
  const matrix = (name: string, cols: number, rows: number, type: GgmlTypeId): GgufTensorInput => ({
    name,
    dims: [cols, rows],
    type,
    data: {
      length: (rows * cols * (type === GgmlType.Q6_K ? Q6_K_BLOCK : Q4_K_BLOCK)) / QK_K,
      read: () => (type === GgmlType.Q6_K ? randomQ6K(rows, cols) : randomQ4K(rows, cols)),
    },
  });
  const vector = (name: string, n: number, value: (i: number) => number): GgufTensorInput => ({
    name,
    dims: [n],
    type: GgmlType.F32,
    data: f32(Float32Array.from({ length: n }, (_, i) => value(i))),
  });
  const bias = (i: number) => Math.sin(i * 12.9898) * 0.05;
  const tensors = [
    matrix("token_embd.weight", s.hidden, s.vocab, GgmlType.Q4_K),
    matrix("output.weight", s.hidden, s.vocab, GgmlType.Q6_K),
    vector("output_norm.weight", s.hidden, () => 1),
  ];
  for (let l = 0; l < s.layers; l++) {
    const b = `blk.${l}`;
    const more = usesMoreBits(l, s.layers) ? GgmlType.Q6_K : GgmlType.Q4_K;
    tensors.push(
      vector(`${b}.attn_norm.weight`, s.hidden, () => 1),
      matrix(`${b}.attn_q.weight`, s.hidden, s.hidden, GgmlType.Q4_K),
      vector(`${b}.attn_q.bias`, s.hidden, bias),
      matrix(`${b}.attn_k.weight`, s.hidden, kvDim, GgmlType.Q4_K),
      vector(`${b}.attn_k.bias`, kvDim, bias),
      matrix(`${b}.attn_v.weight`, s.hidden, kvDim, more),
      vector(`${b}.attn_v.bias`, kvDim, bias),
      matrix(`${b}.attn_output.weight`, s.hidden, s.hidden, GgmlType.Q4_K),
      vector(`${b}.ffn_norm.weight`, s.hidden, () => 1),
      matrix(`${b}.ffn_gate.weight`, s.hidden, s.ffn, GgmlType.Q4_K),
      matrix(`${b}.ffn_up.weight`, s.hidden, s.ffn, GgmlType.Q4_K),
      matrix(`${b}.ffn_down.weight`, s.ffn, s.hidden, more),
    );
  }
  return tensors;
}

/** The model's metadata, with the tokenizer of `tokenizerGguf` padded to the shape's vocabulary. */
export function syntheticMetadata(s: Shape, tokenizerGguf: string): GgufMetadataEntry[] {
  const source = openGguf(tokenizerGguf);
  const tokenizer = source.metadataEntries.filter((e) => e.key.startsWith("tokenizer."));
  source.close();
  const tokens = tokenizer.find((e) => e.key === "tokenizer.ggml.tokens");
  const types = tokenizer.find((e) => e.key === "tokenizer.ggml.token_type");
  if (!tokens || !types || !Array.isArray(tokens.value) || !Array.isArray(types.value))
    throw new Error(`${tokenizerGguf}: no tokenizer.ggml.tokens / token_type to borrow`);
  if (tokens.value.length > s.vocab)
    throw new Error(`${tokenizerGguf}: ${tokens.value.length} tokens, more than the shape's ${s.vocab}`);
  const padded = (e: GgufMetadataEntry, pad: (i: number) => string | number): GgufMetadataEntry => {
    const value = [...(e.value as (string | number)[])];
    for (let i = value.length; i < s.vocab; i++) value.push(pad(i));
    return { ...e, value };
  };
  const UNUSED = 5;
  const a = "qwen2";
  return [
    metadataEntry("general.architecture", U.STRING, a),
    metadataEntry("general.name", U.STRING, "ortserve synthetic qwen2 7B shape"),
    metadataEntry("general.file_type", U.UINT32, 15), // LLAMA_FTYPE_MOSTLY_Q4_K_M
    metadataEntry(`${a}.block_count`, U.UINT32, s.layers),
    metadataEntry(`${a}.context_length`, U.UINT32, s.contextLength),
    metadataEntry(`${a}.embedding_length`, U.UINT32, s.hidden),
    metadataEntry(`${a}.feed_forward_length`, U.UINT32, s.ffn),
    metadataEntry(`${a}.attention.head_count`, U.UINT32, s.heads),
    metadataEntry(`${a}.attention.head_count_kv`, U.UINT32, s.kvHeads),
    metadataEntry(`${a}.rope.freq_base`, U.FLOAT32, s.ropeTheta),
    metadataEntry(`${a}.attention.layer_norm_rms_epsilon`, U.FLOAT32, s.rmsEps),
    ...tokenizer.map((e) =>
      e === tokens ? padded(e, (i) => `[PAD${i}]`) : e === types ? padded(e, () => UNUSED) : e,
    ),
    metadataEntry("general.quantization_version", U.UINT32, 2),
  ];
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      out: { type: "string", default: join(ggufCacheDir(), "synthetic-qwen2-7b-q4_k_m.gguf") },
      "tokenizer-from": {
        type: "string",
        default: join(ggufCacheDir(), "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
      },
    },
  });
  if (!existsSync(values["tokenizer-from"]))
    throw new Error(`${values["tokenizer-from"]} not found: pass --tokenizer-from <a qwen2 GGUF>`);
  const tensors = syntheticTensors(SHAPE_7B);
  const bytes = tensors.reduce((n, t) => n + t.data.length, 0);
  const fs = statfsSync(dirname(values.out));
  if (fs.bavail * fs.bsize < bytes * 1.05)
    throw new Error(`${dirname(values.out)}: ${(bytes / 1e9).toFixed(1)} GB needed, less is free`);
  const t0 = performance.now();
  writeGguf(values.out, { metadata: syntheticMetadata(SHAPE_7B, values["tokenizer-from"]), tensors });
  console.log(
    `${values.out}: ${(bytes / 1e9).toFixed(2)} GB of tensors in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
  );
}
