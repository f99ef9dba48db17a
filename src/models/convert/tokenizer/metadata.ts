/**
 * The tokenizer part of GGUF metadata (`tokenizer.*`), read once into a typed record so the
 * builders never touch raw `GgufValue`s. Key names follow llama.cpp's `LLM_KV_TOKENIZER_*`.
 */
import type { GgufValue } from "../../gguf/types.ts";

/** llama.cpp `llama_token_type`, stored per token in `tokenizer.ggml.token_type`. */
export const TokenType = {
  UNDEFINED: 0,
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  USER_DEFINED: 4,
  UNUSED: 5,
  BYTE: 6,
} as const;

export interface TokenizerMetadata {
  /** `tokenizer.ggml.model`: "gpt2" (byte-level BPE), "llama" (SentencePiece), ... */
  model: string;
  /** `tokenizer.ggml.pre`; absent in old files. */
  pre?: string;
  tokens: string[];
  tokenTypes: number[];
  scores?: number[];
  merges?: string[];
  bosId?: number;
  eosId?: number;
  unkId?: number;
  padId?: number;
  /** Ids llama.cpp would otherwise guess from token text (see added-tokens.ts). */
  fimIds: { pre?: number; suf?: number; mid?: number; pad?: number; rep?: number; sep?: number };
  addBos?: boolean;
  addEos?: boolean;
  addSpacePrefix?: boolean;
  chatTemplate?: string;
  /** `tokenizer.huggingface.json`: the original tokenizer.json, when the converter kept it. */
  huggingfaceJson?: string;
  /** `general.name`: llama.cpp keys a few token-attribute quirks on it. */
  modelName?: string;
  /** `<arch>.context_length`. */
  contextLength?: number;
}

function fail(key: string, expected: string, value: GgufValue): never {
  const shown = Array.isArray(value) ? `array(${value.length})` : typeof value;
  throw new Error(`GGUF metadata ${key}: expected ${expected}, got ${shown}`);
}

function optNumber(md: Map<string, GgufValue>, key: string): number | undefined {
  const v = md.get(key);
  if (v === undefined) return undefined;
  if (typeof v === "number") return v;
  if (typeof v === "bigint" && v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= 0n) return Number(v);
  return fail(key, "an integer", v);
}

/** A token id; negative ids (some converters write -1 for "none") count as absent. */
function optId(md: Map<string, GgufValue>, key: string): number | undefined {
  const v = optNumber(md, key);
  return v === undefined || v < 0 ? undefined : v;
}

function optBool(md: Map<string, GgufValue>, key: string): boolean | undefined {
  const v = md.get(key);
  if (v === undefined) return undefined;
  if (typeof v === "boolean") return v;
  return fail(key, "a boolean", v);
}

function optString(md: Map<string, GgufValue>, key: string): string | undefined {
  const v = md.get(key);
  if (v === undefined) return undefined;
  if (typeof v === "string") return v;
  return fail(key, "a string", v);
}

function optArray<T>(
  md: Map<string, GgufValue>,
  key: string,
  expected: string,
  isItem: (x: GgufValue) => x is T & GgufValue,
): T[] | undefined {
  const v = md.get(key);
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) return fail(key, expected, v);
  // Checking every element of a 200k-entry array is cheap next to building the vocab.
  for (const x of v) if (!isItem(x)) return fail(key, expected, v);
  return v as T[];
}

const isString = (x: GgufValue): x is string => typeof x === "string";
const isNumber = (x: GgufValue): x is number => typeof x === "number";

export function readTokenizerMetadata(md: Map<string, GgufValue>): TokenizerMetadata {
  const model = optString(md, "tokenizer.ggml.model");
  if (model === undefined) throw new Error("GGUF has no tokenizer (tokenizer.ggml.model is missing)");
  const tokens = optArray(md, "tokenizer.ggml.tokens", "an array of strings", isString);
  if (!tokens) throw new Error("GGUF has no vocabulary (tokenizer.ggml.tokens is missing)");
  const types = optArray(md, "tokenizer.ggml.token_type", "an array of integers", isNumber);
  if (types && types.length < tokens.length) {
    throw new Error(`tokenizer.ggml.token_type has ${types.length} entries for ${tokens.length} tokens`);
  }
  const scores = optArray(md, "tokenizer.ggml.scores", "an array of numbers", isNumber);
  if (scores && scores.length < tokens.length) {
    throw new Error(`tokenizer.ggml.scores has ${scores.length} entries for ${tokens.length} tokens`);
  }
  const arch = optString(md, "general.architecture");
  // llama.cpp disables special ids that point outside the vocabulary.
  const id = (key: string) => {
    const v = optId(md, key);
    return v !== undefined && v < tokens.length ? v : undefined;
  };
  // llama.cpp's defaults for SentencePiece files that omit the ids (the SentencePiece convention).
  const spm = (fallback: number) => (model === "llama" && fallback < tokens.length ? fallback : undefined);
  return {
    model,
    pre: optString(md, "tokenizer.ggml.pre"),
    // llama.cpp renames empty tokens the same way, keeping every text unique.
    tokens: tokens.map((t, i) => (t === "" ? `[EMPTY_${i}]` : t)),
    // llama.cpp treats a missing type array as "all normal".
    tokenTypes: types ?? tokens.map(() => TokenType.NORMAL),
    scores,
    merges: optArray(md, "tokenizer.ggml.merges", "an array of strings", isString),
    bosId: id("tokenizer.ggml.bos_token_id") ?? spm(1),
    eosId: id("tokenizer.ggml.eos_token_id") ?? spm(2),
    unkId: id("tokenizer.ggml.unknown_token_id") ?? spm(0),
    padId: id("tokenizer.ggml.padding_token_id"),
    fimIds: {
      pre: id("tokenizer.ggml.fim_pre_token_id") ?? id("tokenizer.ggml.prefix_token_id"),
      suf: id("tokenizer.ggml.fim_suf_token_id") ?? id("tokenizer.ggml.suffix_token_id"),
      mid: id("tokenizer.ggml.fim_mid_token_id") ?? id("tokenizer.ggml.middle_token_id"),
      pad: id("tokenizer.ggml.fim_pad_token_id"),
      rep: id("tokenizer.ggml.fim_rep_token_id"),
      sep: id("tokenizer.ggml.fim_sep_token_id"),
    },
    addBos: optBool(md, "tokenizer.ggml.add_bos_token"),
    addEos: optBool(md, "tokenizer.ggml.add_eos_token"),
    addSpacePrefix: optBool(md, "tokenizer.ggml.add_space_prefix"),
    chatTemplate: optString(md, "tokenizer.chat_template"),
    huggingfaceJson: optString(md, "tokenizer.huggingface.json"),
    modelName: optString(md, "general.name"),
    contextLength: arch ? optNumber(md, `${arch}.context_length`) : undefined,
  };
}
