/**
 * Byte-level BPE pre-tokenization per `tokenizer.ggml.pre`, mirroring llama.cpp
 * (src/llama-vocab.cpp `llm_tokenizer_bpe` and the pre-type switch in `load`).
 *
 * llama.cpp applies its regexes one after another, each splitting the pieces left by the previous
 * one and keeping both matches and the text between them; that is exactly a Hugging Face
 * `Split(behavior: "Isolated")`, so every pre type becomes a Sequence of Splits followed by a
 * regex-less ByteLevel. Splits are used even where the original tokenizer.json has
 * `Digits(individual_digits)` or a regex-using `ByteLevel`, because transformers.js implements
 * those with JS `\d` (ASCII only, where Rust and llama.cpp use Unicode \p{N}) and JS `\s` (which
 * wrongly adds U+FEFF and misses U+0085); its Split rewrites `\s`/`\d` to the Unicode classes, so
 * the same JSON behaves identically in Rust tokenizers, transformers.js and llama.cpp.
 */

/** GPT-2's pattern. llama.cpp's hand-written matcher implements it including the final `\s+`. */
const GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/** llama.cpp's spelling of `(?i:'s|'t|...)`: an explicit class, so no Unicode case folding. */
const CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
const LLAMA3 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;
const QWEN2 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;
const QWEN35 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;

export interface PreTokenizerSpec {
  /** Applied in order, each as an isolating split. */
  regexes: string[];
  /** llama.cpp `clean_spaces`: detokenization drops the space before punctuation (= HF clean_up_tokenization_spaces). */
  cleanSpaces: boolean;
  /** llama.cpp `ignore_merges`: a pre-token that is itself in the vocab is emitted without merging. */
  ignoreMerges: boolean;
  /** llama.cpp's add_bos default for this type, used when the GGUF has no add_bos_token. */
  addBos: boolean;
}

function spec(
  regexes: string[],
  cleanSpaces: boolean,
  extra: Partial<PreTokenizerSpec> = {},
): PreTokenizerSpec {
  return { regexes, cleanSpaces, ignoreMerges: false, addBos: false, ...extra };
}

/** Each entry: the GGUF names llama.cpp maps to one pre type, and that type's behaviour. */
const TABLE: [names: string[], spec: PreTokenizerSpec][] = [
  [["default"], spec(["[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"], true)],
  [["gpt-2", "phi-2", "gigachat", "a.x-4.0", "mellum", "mpt", "olmo", "jais", "exaone4"], spec([GPT2], true)],
  [["trillion", "granite-docling"], spec([GPT2], false)],
  [["starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"], spec(["\\p{N}", GPT2], true)],
  [["smollm", "command-r"], spec(["\\p{N}", GPT2], false)],
  [
    [
      "llama3",
      "llama-v3",
      "llama-bpe",
      "falcon3",
      "falcon-h1",
      "pixtral",
      "midm-2.0",
      "lfm2",
      "jina-v5-nano",
    ],
    spec([LLAMA3], true, { ignoreMerges: true, addBos: true }),
  ],
  [["dbrx", "smaug-bpe"], spec([LLAMA3], true)],
  [["qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"], spec([QWEN2], false)],
  [["stablelm2", "megrez"], spec([QWEN2], true)],
  [["qwen35"], spec([QWEN35], false)],
];

const BY_NAME = new Map(TABLE.flatMap(([names, s]) => names.map((n) => [n, s] as const)));

export const supportedPreTokenizers: readonly string[] = [...BY_NAME.keys()];

/** The spec for a GGUF `tokenizer.ggml.pre` value; llama.cpp falls back to "default" when it is absent. */
export function preTokenizerSpec(pre: string | undefined): PreTokenizerSpec {
  const found = BY_NAME.get(pre ?? "default");
  if (!found) {
    throw new Error(
      `unsupported tokenizer.ggml.pre ${JSON.stringify(pre)}; supported: ${supportedPreTokenizers.join(", ")}`,
    );
  }
  return found;
}

/** The tokenizer.json `pre_tokenizer` for a spec. */
export function preTokenizerJson(s: PreTokenizerSpec): object {
  return {
    type: "Sequence",
    pretokenizers: [
      ...s.regexes.map((regex) => ({
        type: "Split",
        pattern: { Regex: regex },
        behavior: "Isolated",
        invert: false,
      })),
      // Regex-less: the splits above already did the work; this only maps bytes to symbols.
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
    ],
  };
}
