/**
 * A small SentencePiece-style vocabulary ("llama" tokenizer model) written as a vocab-only GGUF,
 * for parity tests of the SentencePiece path without downloading a model. Pieces come from a few
 * hundred BPE merges learned on English and code, with "▁" word prefixes and distinct scores;
 * anything else (CJK, emoji, most accents) has to go through <0xXX> byte fallback.
 */
import { GgufValueType as V } from "../../src/models/gguf/types.ts";
import { metadataEntry, writeGguf } from "../../src/models/gguf/writer.ts";

const TRAINING_TEXT = `The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of
times. Machine learning models are trained on large datasets and then used for inference. In the
beginning there was nothing, and then there was something. She said that the weather would be fine
and that we should go to the beach. function add(a, b) { return a + b; } for (let i = 0; i < 10; i++)
{ console.log(i); } def main(): print("hello world") return None import numpy as np
Hello, world! What's up? I'm fine, thanks. Don't worry, we'll see. 0123456789 3.14 100% $5`;

function learnPieces(text: string, merges: number): string[] {
  const words = new Map<string, number>();
  for (const w of text.split(/\s+/).filter(Boolean)) {
    const key = `▁${w}`;
    words.set(key, (words.get(key) ?? 0) + 1);
  }
  let split = [...words].map(([w, n]) => ({ parts: Array.from(w), n }));
  const pieces: string[] = [];
  for (let m = 0; m < merges; m++) {
    const counts = new Map<string, number>();
    for (const { parts, n } of split) {
      for (let i = 0; i + 1 < parts.length; i++) {
        const key = `${parts[i]}\u0000${parts[i + 1]}`;
        counts.set(key, (counts.get(key) ?? 0) + n);
      }
    }
    // Highest count, ties by text: deterministic.
    const best = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))[0];
    if (!best) break;
    const [left, right] = best[0].split("\u0000");
    // Different splits can rebuild a piece already learned; vocabulary texts must stay unique.
    if (!pieces.includes(left + right)) pieces.push(left + right);
    split = split.map(({ parts, n }) => {
      const out: string[] = [];
      for (let i = 0; i < parts.length; i++) {
        if (i + 1 < parts.length && parts[i] === left && parts[i + 1] === right) {
          out.push(left + right);
          i++;
        } else out.push(parts[i]);
      }
      return { parts: out, n };
    });
  }
  return pieces;
}

export interface SpmVocabulary {
  tokens: string[];
  scores: number[];
  types: number[];
}

export function spmVocabulary(): SpmVocabulary {
  const tokens: string[] = [];
  const scores: number[] = [];
  const types: number[] = [];
  const add = (t: string, score: number, type: number) => {
    tokens.push(t);
    scores.push(score);
    types.push(type);
  };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`, 0, 6);
  add("<|im_start|>", 0, 3);
  add("<|im_end|>", 0, 3);
  // User-defined: matched verbatim in the text, printed as is.
  add("<tab>", 0, 4);
  const chars = [...new Set(Array.from(TRAINING_TEXT.replace(/\s+/g, "▁")))].sort();
  const learned = learnPieces(TRAINING_TEXT, 400);
  // Distinct scores: llama.cpp breaks score ties by position, BPE ranks cannot.
  for (const [i, p] of learned.entries()) add(p, -(i + 1), 1);
  for (const [i, c] of chars.entries()) add(c, -(learned.length + 1 + i), 1);
  return { tokens, scores, types };
}

/** Writes the vocab-only GGUF (llama hyper-parameters, no tensors); returns its path. */
export function writeSpmGguf(path: string): string {
  const v = spmVocabulary();
  writeGguf(path, {
    metadata: [
      metadataEntry("general.architecture", V.STRING, "llama"),
      metadataEntry("general.name", V.STRING, "ortserve synthetic sentencepiece"),
      metadataEntry("llama.block_count", V.UINT32, 1),
      metadataEntry("llama.context_length", V.UINT32, 256),
      metadataEntry("llama.embedding_length", V.UINT32, 64),
      metadataEntry("llama.feed_forward_length", V.UINT32, 128),
      metadataEntry("llama.attention.head_count", V.UINT32, 4),
      metadataEntry("llama.attention.head_count_kv", V.UINT32, 4),
      metadataEntry("llama.attention.layer_norm_rms_epsilon", V.FLOAT32, 1e-5),
      metadataEntry("llama.rope.dimension_count", V.UINT32, 16),
      metadataEntry("tokenizer.ggml.model", V.STRING, "llama"),
      metadataEntry("tokenizer.ggml.pre", V.STRING, "default"),
      metadataEntry("tokenizer.ggml.tokens", V.ARRAY, v.tokens, V.STRING),
      metadataEntry("tokenizer.ggml.scores", V.ARRAY, v.scores, V.FLOAT32),
      metadataEntry("tokenizer.ggml.token_type", V.ARRAY, v.types, V.INT32),
      metadataEntry("tokenizer.ggml.bos_token_id", V.UINT32, 1),
      metadataEntry("tokenizer.ggml.eos_token_id", V.UINT32, 2),
      metadataEntry("tokenizer.ggml.unknown_token_id", V.UINT32, 0),
      metadataEntry("tokenizer.ggml.add_bos_token", V.BOOL, true),
      metadataEntry("tokenizer.ggml.add_eos_token", V.BOOL, false),
      metadataEntry("tokenizer.ggml.add_space_prefix", V.BOOL, true),
    ],
    tensors: [],
  });
  return path;
}
