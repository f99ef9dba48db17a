/**
 * A model's vocabulary as XGrammar needs it, read from the model directory's tokenizer.json:
 * every token's encoded text by id (padded to the logits width), the encoding that turns that
 * text into bytes, and the ids that end generation. Special tokens (added tokens marked special)
 * are given as empty strings, which XGrammar treats as special: they never appear inside a
 * constrained output (their text would vanish from the output with skip_special_tokens).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export interface GrammarVocabulary {
  encodedVocab: string[];
  vocabType: "byte_level" | "byte_fallback" | "raw";
  prependSpace: boolean;
  /** Logits width. */
  vocabSize: number;
  stopTokenIds: number[];
}

interface TokenizerJson {
  model: { type: string; vocab: Record<string, number> | [string, number][]; byte_fallback?: boolean };
  added_tokens?: { id: number; content: string; special: boolean }[];
  decoder?: { type: string; decoders?: { type: string }[]; prepend_scheme?: string } | null;
  normalizer?: { type: string; normalizers?: { type: string; prepend?: string }[]; prepend?: string } | null;
}

function decoderTypes(d: TokenizerJson["decoder"]): string[] {
  if (!d) return [];
  return d.type === "Sequence" ? (d.decoders ?? []).map((x) => x.type) : [d.type];
}

export function readGrammarVocabulary(
  modelDir: string,
  vocabSize: number,
  stopTokenIds: readonly number[],
): GrammarVocabulary {
  const tj = JSON.parse(readFileSync(join(modelDir, "tokenizer.json"), "utf8")) as TokenizerJson;
  const encodedVocab = new Array<string>(vocabSize).fill("");
  const entries: [string, number][] = Array.isArray(tj.model.vocab)
    ? tj.model.vocab.map(([t], i) => [t, i])
    : Object.entries(tj.model.vocab);
  for (const [token, id] of entries) if (id < vocabSize) encodedVocab[id] = token;
  for (const a of tj.added_tokens ?? [])
    if (a.id < vocabSize) encodedVocab[a.id] = a.special ? "" : a.content;
  const decoders = decoderTypes(tj.decoder);
  const vocabType = decoders.includes("ByteLevel")
    ? "byte_level"
    : decoders.includes("ByteFallback") || tj.model.byte_fallback
      ? "byte_fallback"
      : "raw";
  // SentencePiece-style tokenizers put "▁" before the text (normalizer Prepend or Metaspace).
  const normalizers = tj.normalizer
    ? tj.normalizer.type === "Sequence"
      ? (tj.normalizer.normalizers ?? [])
      : [tj.normalizer]
    : [];
  const prependSpace =
    normalizers.some((n) => n.type === "Prepend") ||
    (tj.decoder?.type === "Metaspace" && tj.decoder.prepend_scheme !== "never");
  return { encodedVocab, vocabType, prependSpace, vocabSize, stopTokenIds: [...stopTokenIds] };
}
