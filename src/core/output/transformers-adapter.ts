/**
 * `TokenizerLike` over a transformers.js tokenizer loaded from a model
 * directory's tokenizer.json / tokenizer_config.json.
 */
import type { PreTrainedTokenizer } from "@huggingface/transformers";
import type { ByteEncoding, DecodeOptions, TokenizerLike } from "./tokenizer-like.ts";

interface DecoderJson {
  type?: string;
  decoders?: DecoderJson[];
}

function usesByteLevelDecoder(decoder: DecoderJson | null | undefined): boolean {
  if (!decoder) return false;
  if (decoder.type === "ByteLevel") return true;
  return decoder.type === "Sequence" && (decoder.decoders ?? []).some(usesByteLevelDecoder);
}

export function fromTransformersTokenizer(tok: PreTrainedTokenizer): TokenizerLike {
  const inner = tok._tokenizer;
  const json = tok._tokenizerJSON;
  const vocabSize = inner.model?.vocab.length ?? 0;
  const addedTokens = new Map<number, string>();
  const specialIds = new Set<number>();
  for (const [id, token] of inner.get_added_tokens_decoder()) {
    addedTokens.set(id, token.content);
    if (token.special) specialIds.add(id);
  }
  const byteEncoding: ByteEncoding = usesByteLevelDecoder(json?.decoder)
    ? "byte-level"
    : json?.model?.byte_fallback === true
      ? "byte-fallback"
      : "none";

  return {
    vocabSize,
    addedTokens,
    specialIds,
    byteEncoding,
    // Python transformers defaults this to false when the config is silent; transformers.js to true.
    cleanUpTokenizationSpaces: tok._tokenizerConfig?.clean_up_tokenization_spaces === true,
    idToToken: (id) =>
      Number.isInteger(id) && id >= 0 && id < vocabSize ? inner.id_to_token(id) : undefined,
    decode(ids: readonly number[], options: DecodeOptions): string {
      // HF tokenizers drops unknown ids; transformers.js would print its unk token instead.
      const known = ids.filter((id) => Number.isInteger(id) && id >= 0 && id < vocabSize);
      // transformers.js throws on an empty list rather than returning "".
      if (known.length === 0) return "";
      return tok.decode(known, {
        skip_special_tokens: options.skipSpecialTokens,
        clean_up_tokenization_spaces: options.cleanUpTokenizationSpaces ?? false,
      });
    },
  };
}
