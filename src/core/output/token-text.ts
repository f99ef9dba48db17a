/**
 * Per-token strings and bytes for logprobs.
 *
 * `token`: vLLM decodes each id on its own with the tokenizer's Python
 * `decode` defaults — special tokens kept, the tokenizer's own space clean-up
 * (`convert_ids_list_to_tokens` in vllm/transformers_utils/detokenizer_utils.py),
 * or writes "token_id:<id>" when return_tokens_as_token_ids is set
 * (`_create_chat_logprobs` in vllm/entrypoints/openai/). A token holding part
 * of a character therefore reads "\uFFFD".
 *
 * `bytes`: vLLM sends the UTF-8 of that string (U+FFFD's EF BF BD for a split
 * character); OpenAI sends the token's real bytes, so the bytes of consecutive
 * tokens concatenate to the text's UTF-8. ortserve follows OpenAI here.
 *
 * Both are cached per tokenizer in arrays indexed by id.
 */
import { byteLevelBytes } from "./byte-alphabet.ts";
import type { TokenizerLike } from "./tokenizer-like.ts";

const REPLACEMENT = "\uFFFD";
const BYTE_FALLBACK = /^<0x([0-9A-Fa-f]{2})>$/;
const utf8 = new TextEncoder();

interface TokenTable {
  texts: (string | undefined)[];
  bytes: (readonly number[] | undefined)[];
}

const tables = new WeakMap<TokenizerLike, TokenTable>();

function tableFor(tokenizer: TokenizerLike): TokenTable {
  let table = tables.get(tokenizer);
  if (!table) {
    table = { texts: new Array(tokenizer.vocabSize), bytes: new Array(tokenizer.vocabSize) };
    tables.set(tokenizer, table);
  }
  return table;
}

function inVocab(tokenizer: TokenizerLike, id: number): boolean {
  return Number.isInteger(id) && id >= 0 && id < tokenizer.vocabSize;
}

/** Text of `ids` the way HF's Python `decode` renders it with its defaults. */
function pythonDecode(tokenizer: TokenizerLike, ids: readonly number[]): string {
  return tokenizer.decode(ids, {
    skipSpecialTokens: false,
    cleanUpTokenizationSpaces: tokenizer.cleanUpTokenizationSpaces,
  });
}

/** The "token" string of a logprob entry. */
export function tokenLogprobText(
  tokenizer: TokenizerLike,
  id: number,
  returnTokensAsTokenIds: boolean,
): string {
  if (returnTokensAsTokenIds) return `token_id:${id}`;
  if (!inVocab(tokenizer, id)) return "";
  const { texts } = tableFor(tokenizer);
  let text = texts[id];
  if (text === undefined) {
    text = pythonDecode(tokenizer, [id]);
    texts[id] = text;
  }
  return text;
}

/** The "bytes" of a logprob entry: the token's own bytes, [] for an unknown id. */
export function tokenBytes(tokenizer: TokenizerLike, id: number): readonly number[] {
  if (!inVocab(tokenizer, id)) return [];
  const { bytes } = tableFor(tokenizer);
  let value = bytes[id];
  if (value === undefined) {
    value = Array.from(rawBytes(tokenizer, id));
    bytes[id] = value;
  }
  return value;
}

function rawBytes(tokenizer: TokenizerLike, id: number): Uint8Array {
  const added = tokenizer.addedTokens.get(id);
  if (added !== undefined) return utf8.encode(added);
  const token = tokenizer.idToToken(id) ?? "";
  if (tokenizer.byteEncoding === "byte-level") return byteLevelBytes(token) ?? utf8.encode(token);
  if (tokenizer.byteEncoding === "byte-fallback") {
    const byte = BYTE_FALLBACK.exec(token);
    if (byte) return Uint8Array.of(Number.parseInt(byte[1], 16));
  }
  return utf8.encode(tokenLogprobText(tokenizer, id, false));
}

/**
 * vLLM main's repair of a "token" that ends in U+FFFD (`_correct_decoded_token`
 * in vllm/v1/engine/logprobs.py): decode it after 1 to 4 of the preceding
 * sampled ids, and once that completes the character, return the text this
 * token completes — including the bytes of preceding partial tokens — or ""
 * while the character is still unfinished. Other tokens keep `tokenLogprobText`.
 */
export function completedTokenText(
  tokenizer: TokenizerLike,
  id: number,
  precedingIds: readonly number[],
): string {
  const own = tokenLogprobText(tokenizer, id, false);
  if (!own.endsWith(REPLACEMENT)) return own;
  const maxContext = Math.min(precedingIds.length, 4);
  for (let n = 1; n <= maxContext; n++) {
    const context = precedingIds.slice(-n);
    const full = pythonDecode(tokenizer, [...context, id]);
    if (full.endsWith(REPLACEMENT)) continue;
    // Preceding tokens that were themselves partial belong to this character.
    let cleanEnd = context.length;
    while (cleanEnd > 0 && tokenLogprobText(tokenizer, context[cleanEnd - 1], false).endsWith(REPLACEMENT)) {
      cleanEnd--;
    }
    const cleanPrefix = cleanEnd > 0 ? pythonDecode(tokenizer, context.slice(0, cleanEnd)) : "";
    let common = 0;
    while (common < cleanPrefix.length && cleanPrefix[common] === full[common]) common++;
    return full.slice(common);
  }
  return "";
}
