/**
 * tokenizer.json pieces for `tokenizer.ggml.model = "llama"`: a SentencePiece vocabulary with
 * scores, as llama.cpp tokenizes it (llm_tokenizer_spm_session): spaces become "▁", a "▁" is
 * prefixed to text at the start and after every added token when add_space_prefix is set, adjacent
 * symbols are merged highest-score first while the merged text is in the vocabulary, and characters
 * left without a token fall back to <0xXX> byte tokens.
 *
 * Hugging Face expresses this as BPE with merges ranked by the score of the merged piece (what its
 * SentencePiece converter derives) plus byte_fallback. They can differ only in corner cases: a tie
 * between equal-score pieces competing in the same word (llama.cpp breaks it by position, BPE by
 * rank), and a piece whose halves are not both in the vocabulary (llama.cpp only needs the merged
 * text to be; HF merges must name vocabulary entries).
 */
import { type TokenizerMetadata, TokenType } from "./metadata.ts";
import type { ModelParts, VocabTraits } from "./parts.ts";
import { vocabObject } from "./vocab.ts";

interface Merge {
  left: string;
  right: string;
  score: number;
  target: number;
  leftId: number;
  rightId: number;
}

/** Every split of a vocabulary piece into two vocabulary pieces, best score first. */
export function mergesFromScores(tokens: readonly string[], scores: readonly number[]): [string, string][] {
  const ids = new Map<string, number>();
  tokens.forEach((t, id) => {
    if (!ids.has(t)) ids.set(t, id);
  });
  const merges: Merge[] = [];
  tokens.forEach((piece, target) => {
    const chars = Array.from(piece);
    if (chars.length < 2) return;
    let left = "";
    for (let i = 1; i < chars.length; i++) {
      left += chars[i - 1];
      const right = piece.slice(left.length);
      const leftId = ids.get(left);
      const rightId = ids.get(right);
      if (leftId !== undefined && rightId !== undefined) {
        merges.push({ left, right, score: scores[target], target, leftId, rightId });
      }
    }
  });
  // Same order as transformers' SentencePieceExtractor: score, then piece id, then the parts' ids.
  merges.sort(
    (a, b) => b.score - a.score || a.target - b.target || a.leftId - b.leftId || a.rightId - b.rightId,
  );
  return merges.map((m) => [m.left, m.right]);
}

export function sentencePieceParts(md: TokenizerMetadata, types: readonly number[]): ModelParts {
  if (!md.scores) throw new Error('GGUF tokenizer "llama" has no tokenizer.ggml.scores');
  if (!types.some((t) => t === TokenType.BYTE)) {
    throw new Error(
      'GGUF tokenizer "llama" has no byte tokens (<0xXX>); this vocabulary is not supported yet',
    );
  }
  // llama.cpp's SentencePiece defaults; the GGUF keys override them.
  const addSpacePrefix = md.addSpacePrefix ?? true;
  const spaceToMeta = { type: "Replace", pattern: { String: " " }, content: "▁" };
  return {
    normalizer: addSpacePrefix
      ? { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "▁" }, spaceToMeta] }
      : spaceToMeta,
    preTokenizer: null,
    decoder: {
      type: "Sequence",
      decoders: [
        { type: "Replace", pattern: { String: "▁" }, content: " " },
        { type: "ByteFallback" },
        { type: "Fuse" },
        // llama.cpp drops the one space the prefix added, and only that.
        ...(addSpacePrefix ? [{ type: "Strip", content: " ", start: 1, stop: 0 }] : []),
      ],
    },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: md.unkId !== undefined ? md.tokens[md.unkId] : null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: true,
      ignore_merges: false,
      vocab: vocabObject(md.tokens),
      merges: mergesFromScores(md.tokens, md.scores),
    },
    plainPostProcessor: null,
  };
}

export const sentencePieceTraits: VocabTraits = {
  cleanSpaces: false,
  addBosDefault: true,
  tokenizerClass: "LlamaTokenizerFast",
};
