/**
 * tokenizer_config.json: what transformers (Python and JS) read next to tokenizer.json — the
 * special-token strings, BOS/EOS insertion, the chat template and the added-token table.
 */
import type { AddedTokenJson } from "./added-tokens.ts";

export interface TokenizerConfigInput {
  addedTokens: AddedTokenJson[];
  bos?: string;
  eos?: string;
  pad?: string;
  unk?: string;
  addBos: boolean;
  addEos: boolean;
  cleanSpaces: boolean;
  chatTemplate?: string;
  modelMaxLength?: number;
  tokenizerClass: string;
}

export function buildTokenizerConfig(c: TokenizerConfigInput): Record<string, unknown> {
  const decoder: Record<string, object> = {};
  for (const t of c.addedTokens) {
    decoder[String(t.id)] = {
      content: t.content,
      lstrip: t.lstrip,
      normalized: t.normalized,
      rstrip: t.rstrip,
      single_word: t.single_word,
      special: t.special,
    };
  }
  return {
    add_bos_token: c.addBos,
    add_eos_token: c.addEos,
    added_tokens_decoder: decoder,
    bos_token: c.bos ?? null,
    eos_token: c.eos ?? null,
    pad_token: c.pad ?? null,
    unk_token: c.unk ?? null,
    ...(c.chatTemplate !== undefined ? { chat_template: c.chatTemplate } : {}),
    clean_up_tokenization_spaces: c.cleanSpaces,
    ...(c.modelMaxLength !== undefined ? { model_max_length: c.modelMaxLength } : {}),
    tokenizer_class: c.tokenizerClass,
  };
}
