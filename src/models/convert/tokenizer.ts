/**
 * Rebuilds tokenizer.json and tokenizer_config.json (Hugging Face layout) from GGUF metadata, so
 * that transformers.js tokenizes exactly like llama.cpp does with the same file. The pieces live
 * in ./tokenizer/: metadata reading, added tokens, pre-tokenizers and one builder per vocab type.
 */
import type { GgufValue } from "../gguf/types.ts";
import { type AddedTokenJson, buildAddedTokens, effectiveTokenTypes } from "./tokenizer/added-tokens.ts";
import { byteLevelBpeParts, byteLevelBpeTraits } from "./tokenizer/byte-level-bpe.ts";
import { buildTokenizerConfig } from "./tokenizer/config.ts";
import { readTokenizerMetadata, type TokenizerMetadata } from "./tokenizer/metadata.ts";
import type { ModelParts, VocabTraits } from "./tokenizer/parts.ts";
import { buildPostProcessor } from "./tokenizer/post-processor.ts";
import { sentencePieceParts, sentencePieceTraits } from "./tokenizer/sentencepiece-bpe.ts";

export interface TokenizerFiles {
  tokenizerJson: object;
  tokenizerConfigJson: object;
  specialTokens: {
    bos?: string;
    eos?: string;
    pad?: string;
    unk?: string;
    bosId?: number;
    eosId?: number;
    padId?: number;
    unkId?: number;
  };
  chatTemplate?: string;
}

function unsupportedModel(model: string): Error {
  return new Error(
    `unsupported GGUF tokenizer model ${JSON.stringify(model)} (supported: "gpt2" byte-level BPE, "llama" SentencePiece)`,
  );
}

function vocabTraits(md: TokenizerMetadata): VocabTraits {
  if (md.model === "gpt2") return byteLevelBpeTraits(md);
  if (md.model === "llama") return sentencePieceTraits;
  throw unsupportedModel(md.model);
}

function modelParts(md: TokenizerMetadata, types: number[]): ModelParts {
  if (md.model === "gpt2") return byteLevelBpeParts(md);
  if (md.model === "llama") return sentencePieceParts(md, types);
  throw unsupportedModel(md.model);
}

/** Settings for an embedded tokenizer.json, whose vocabulary type we may not otherwise support. */
function embeddedTraits(md: TokenizerMetadata): VocabTraits {
  try {
    return vocabTraits(md);
  } catch {
    return { cleanSpaces: false, addBosDefault: false, tokenizerClass: "PreTrainedTokenizerFast" };
  }
}

/** The original tokenizer.json, when the GGUF carries one, with what tokenizer_config needs from it. */
function embeddedJson(md: TokenizerMetadata): { json: object; added: AddedTokenJson[] } | undefined {
  if (md.huggingfaceJson === undefined) return undefined;
  let json: { added_tokens?: AddedTokenJson[] };
  try {
    json = JSON.parse(md.huggingfaceJson);
  } catch (err) {
    throw new Error(`tokenizer.huggingface.json is not valid JSON: ${(err as Error).message}`);
  }
  return { json, added: json.added_tokens ?? [] };
}

export function buildTokenizerFiles(
  metadata: Map<string, GgufValue>,
  opts: { modelMaxLength?: number } = {},
): TokenizerFiles {
  const md = readTokenizerMetadata(metadata);
  const text = (id: number | undefined) => (id === undefined ? undefined : md.tokens[id]);
  const special = {
    bos: text(md.bosId),
    eos: text(md.eosId),
    pad: text(md.padId),
    unk: text(md.unkId),
    bosId: md.bosId,
    eosId: md.eosId,
    padId: md.padId,
    unkId: md.unkId,
  };
  const types = effectiveTokenTypes(md);
  const embedded = embeddedJson(md);
  const traits = embedded ? embeddedTraits(md) : vocabTraits(md);
  const addBos = (md.addBos ?? traits.addBosDefault) && md.bosId !== undefined;
  const addEos = (md.addEos ?? false) && md.eosId !== undefined;

  const addedTokens = embedded?.added ?? buildAddedTokens(md, types);
  let tokenizerJson = embedded?.json;
  if (!tokenizerJson) {
    const parts = modelParts(md, types);
    tokenizerJson = {
      version: "1.0",
      truncation: null,
      padding: null,
      added_tokens: addedTokens,
      normalizer: parts.normalizer,
      pre_tokenizer: parts.preTokenizer,
      post_processor: buildPostProcessor(
        addBos ? { id: md.bosId!, text: special.bos! } : undefined,
        addEos ? { id: md.eosId!, text: special.eos! } : undefined,
        parts.plainPostProcessor,
      ),
      decoder: parts.decoder,
      model: parts.model,
    };
  }

  const tokenizerConfigJson = buildTokenizerConfig({
    addedTokens,
    bos: special.bos,
    eos: special.eos,
    pad: special.pad,
    unk: special.unk,
    addBos,
    addEos,
    cleanSpaces: traits.cleanSpaces,
    chatTemplate: md.chatTemplate,
    modelMaxLength: opts.modelMaxLength ?? md.contextLength,
    tokenizerClass: traits.tokenizerClass,
  });
  return { tokenizerJson, tokenizerConfigJson, specialTokens: special, chatTemplate: md.chatTemplate };
}
