/**
 * tokenizer.json pieces for `tokenizer.ggml.model = "gpt2"`: GPT-2 style byte-level BPE. GGUF
 * stores the vocabulary already byte-encoded ("Ġthe") and the merges in rank order, so both carry
 * over unchanged; only the pre-tokenizer depends on `tokenizer.ggml.pre`.
 */
import type { TokenizerMetadata } from "./metadata.ts";
import type { ModelParts, VocabTraits } from "./parts.ts";
import { preTokenizerJson, preTokenizerSpec } from "./pre-tokenizers.ts";
import { vocabObject } from "./vocab.ts";

/**
 * GGUF merges are "left right"; llama.cpp splits at the first space after the first character (a
 * merge may start with a space in non-byte-level vocabularies) and keeps the first rank of a
 * duplicated pair. The array form keeps pieces containing spaces intact in tokenizer.json.
 */
export function parseMerges(merges: readonly string[]): [string, string][] {
  const seen = new Set<string>();
  const out: [string, string][] = [];
  for (const m of merges) {
    const at = m.indexOf(" ", 1);
    if (at < 0 || seen.has(m)) continue;
    seen.add(m);
    out.push([m.slice(0, at), m.slice(at + 1)]);
  }
  return out;
}

export function byteLevelBpeParts(md: TokenizerMetadata): ModelParts {
  if (!md.merges) throw new Error('GGUF tokenizer "gpt2" has no tokenizer.ggml.merges');
  const spec = preTokenizerSpec(md.pre);
  return {
    normalizer: null,
    preTokenizer: preTokenizerJson(spec),
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE",
      dropout: null,
      // llama.cpp never emits an unknown token here: every byte has a symbol of its own.
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: spec.ignoreMerges,
      vocab: vocabObject(md.tokens),
      merges: parseMerges(md.merges),
    },
    // A plain ByteLevel processor when nothing is added: what HF writes for these tokenizers.
    plainPostProcessor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
  };
}

export function byteLevelBpeTraits(md: TokenizerMetadata): VocabTraits {
  const spec = preTokenizerSpec(md.pre);
  return { cleanSpaces: spec.cleanSpaces, addBosDefault: spec.addBos, tokenizerClass: "GPT2Tokenizer" };
}
