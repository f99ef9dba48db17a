/**
 * Tokenizers for the output-stage suites: the converted default model's
 * (the suites using it skip when setup has not produced it) and a tiny
 * hand-made byte vocabulary for rules no real vocabulary exercises.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { AutoTokenizer, env } from "@huggingface/transformers";
import type { TokenizerLike } from "../../src/core/output/tokenizer-like.ts";
import { fromTransformersTokenizer } from "../../src/core/output/transformers-adapter.ts";
import { modelsDir } from "../../src/util/paths.ts";

const MODEL_ID = "smollm2-135m-instruct";

export const hasModelTokenizer: boolean = existsSync(join(modelsDir(), MODEL_ID, "tokenizer.json"));

export interface ModelTokenizer {
  tokenizer: TokenizerLike;
  /** Ids of `text` as written: special-token spellings become their ids. */
  encode(text: string): number[];
}

let loaded: Promise<ModelTokenizer> | undefined;

/** The default model's tokenizer, loaded once, strictly offline. */
export function loadModelTokenizer(): Promise<ModelTokenizer> {
  loaded ??= (async () => {
    env.allowRemoteModels = false;
    env.allowLocalModels = true;
    env.localModelPath = modelsDir();
    const tok = await AutoTokenizer.from_pretrained(MODEL_ID);
    return {
      tokenizer: fromTransformersTokenizer(tok),
      encode: (text) => tok.encode(text, { add_special_tokens: false }),
    };
  })();
  return loaded;
}

export interface ByteVocabOptions {
  /** Put this in front of an added token that follows other text, like a SentencePiece decoder. */
  addedTokenSeparator?: string;
}

/**
 * Ids 0–255 are single bytes; 256 "<a>" and 257 "<b>" are special added
 * tokens, 258 "[x]" a non-special added token.
 */
export function byteVocab(options: ByteVocabOptions = {}): TokenizerLike {
  const added = new Map([
    [256, "<a>"],
    [257, "<b>"],
    [258, "[x]"],
  ]);
  const specialIds = new Set([256, 257]);
  const text = new TextDecoder();
  const separator = options.addedTokenSeparator ?? "";
  return {
    vocabSize: 259,
    addedTokens: added,
    specialIds,
    byteEncoding: "none",
    cleanUpTokenizationSpaces: false,
    idToToken: (id) => added.get(id) ?? (id >= 0 && id < 256 ? String.fromCharCode(id) : undefined),
    decode(ids, { skipSpecialTokens }) {
      let out = "";
      let bytes: number[] = [];
      for (const id of ids) {
        if (id < 0 || id >= 259 || (skipSpecialTokens && specialIds.has(id))) continue;
        const content = added.get(id);
        if (content === undefined) {
          bytes.push(id);
          continue;
        }
        out += text.decode(new Uint8Array(bytes));
        bytes = [];
        out += (out.length > 0 ? separator : "") + content;
      }
      return out + text.decode(new Uint8Array(bytes));
    },
  };
}

export const utf8Ids = (s: string): number[] => [...new TextEncoder().encode(s)];
