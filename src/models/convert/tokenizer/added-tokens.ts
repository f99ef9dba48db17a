/**
 * Which vocabulary entries become tokenizer.json `added_tokens`, and with what flags.
 *
 * llama.cpp (llama-vocab.cpp) matches control, user-defined and unknown tokens verbatim in the input
 * before pre-tokenizing, which is what HF added tokens do. Control/unknown ones are hidden when
 * detokenizing without specials (HF `special: true`); user-defined ones always print as their text
 * (HF `special: false`). The GGUF converter already stores non-normalized added tokens in their
 * decoded form, so every added token is `normalized: false` and its content is the GGUF text.
 *
 * llama.cpp also patches token types by name at load time; those rules are replicated here so the
 * same strings are split out of the text.
 */
import { type TokenizerMetadata, TokenType } from "./metadata.ts";

export interface AddedTokenJson {
  id: number;
  content: string;
  single_word: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  special: boolean;
}

/** End-of-generation names llama.cpp always marks as control. */
const EOG_NAMES = new Set([
  "<|eot_id|>",
  "<|im_end|>",
  "<|end|>",
  "<|return|>",
  "<|call|>",
  "<|flush|>",
  "<|calls|>",
  "<end_of_turn>",
  "<|endoftext|>",
  "</s>",
  "<|eom_id|>",
  "<EOT>",
  "_<EOT>",
  "[EOT]",
  "[EOS]",
  "<|end_of_text|>",
  "<end_of_utterance>",
  "<eos>",
  "<turn|>",
  "<|tool_response>",
  "<｜end▁of▁sentence｜>",
  "[e~[",
]);

/** Fill-in-the-middle names llama.cpp marks as control when the matching id key is absent. */
const FIM_NAMES: [keyof TokenizerMetadata["fimIds"], string[]][] = [
  [
    "pre",
    [
      "<|fim_prefix|>",
      "<fim-prefix>",
      "<fim_prefix>",
      "<｜fim▁begin｜>",
      "<PRE>",
      "▁<PRE>",
      "<|code_prefix|>",
      "<|prefix|>",
    ],
  ],
  [
    "suf",
    [
      "<|fim_suffix|>",
      "<fim-suffix>",
      "<fim_suffix>",
      "<｜fim▁hole｜>",
      "<SUF>",
      "▁<SUF>",
      "<|code_suffix|>",
      "<|suffix|>",
    ],
  ],
  [
    "mid",
    [
      "<|fim_middle|>",
      "<fim-middle>",
      "<fim_middle>",
      "<｜fim▁end｜>",
      "<MID>",
      "▁<MID>",
      "<|code_middle|>",
      "<|middle|>",
    ],
  ],
  ["pad", ["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"]],
  ["rep", ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"]],
  ["sep", ["<|file_sep|>"]],
];

/** gpt-oss markers llama.cpp forces to user-defined so they always print. */
const FORCED_USER_DEFINED = new Set(["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"]);

/** Token types after llama.cpp's name-based corrections. */
export function effectiveTokenTypes(md: TokenizerMetadata): number[] {
  const types = md.tokenTypes.slice(0, md.tokens.length);
  const controlByName = new Set(EOG_NAMES);
  for (const [key, names] of FIM_NAMES) {
    // llama.cpp takes the first candidate it meets in hash order; vocabularies hold at most one in practice.
    if (md.fimIds[key] === undefined) for (const n of names) controlByName.add(n);
  }
  md.tokens.forEach((text, id) => {
    if (FORCED_USER_DEFINED.has(text)) types[id] = TokenType.USER_DEFINED;
    else if (controlByName.has(text) && types[id] !== TokenType.CONTROL) types[id] = TokenType.CONTROL;
  });
  return types;
}

/** Per-token strip flags llama.cpp derives from the model or pre-tokenizer name. */
function stripFlags(
  md: TokenizerMetadata,
  types: number[],
): Map<number, { lstrip?: boolean; rstrip?: boolean }> {
  const flags = new Map<number, { lstrip?: boolean; rstrip?: boolean }>();
  const set = (text: string, f: { lstrip?: boolean; rstrip?: boolean }) => {
    const id = md.tokens.indexOf(text);
    if (id >= 0) flags.set(id, { ...flags.get(id), ...f });
  };
  const pre = md.pre ?? "";
  const name = (md.modelName ?? "").toLowerCase();
  if (["jina-v2-de", "jina-v2-es", "jina-v2-code"].some((p) => pre.includes(p))) {
    set("<mask>", { lstrip: true });
  } else if (name.includes("phi-3") || name.includes("phi3")) {
    types.forEach((t, id) => {
      if (isAdded(t)) flags.set(id, { rstrip: true });
    });
    set("</s>", { rstrip: true });
    for (const t of ["<unk>", "<s>", "<|endoftext|>"]) set(t, { rstrip: false });
  } else if (name.includes("modern-bert")) {
    set("[MASK]", { lstrip: true });
  }
  return flags;
}

function isAdded(type: number): boolean {
  return type === TokenType.CONTROL || type === TokenType.USER_DEFINED || type === TokenType.UNKNOWN;
}

export function buildAddedTokens(md: TokenizerMetadata, types: number[]): AddedTokenJson[] {
  const strip = stripFlags(md, types);
  const out: AddedTokenJson[] = [];
  types.forEach((type, id) => {
    if (!isAdded(type)) return;
    out.push({
      id,
      content: md.tokens[id],
      single_word: false,
      lstrip: strip.get(id)?.lstrip ?? false,
      rstrip: strip.get(id)?.rstrip ?? false,
      normalized: false,
      special: type !== TokenType.USER_DEFINED,
    });
  });
  return out;
}
