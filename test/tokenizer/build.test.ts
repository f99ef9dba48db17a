/** The shape of the generated files, on small hand-made metadata (no model download needed). */
import { describe, expect, it } from "vitest";
import { parseMerges } from "../../src/models/convert/tokenizer/byte-level-bpe.ts";
import { mergesFromScores } from "../../src/models/convert/tokenizer/sentencepiece-bpe.ts";
import { buildTokenizerFiles } from "../../src/models/convert/tokenizer.ts";
import type { GgufValue } from "../../src/models/gguf/types.ts";

/** GPT-2's byte → symbol map, the alphabet of byte-level vocabularies. */
function byteAlphabet(): string[] {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  let extra = 0;
  return Array.from({ length: 256 }, (_, b) => String.fromCharCode(printable(b) ? b : 256 + extra++));
}

const SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
const MERGES = ["Ġ t", "h e", "Ġt he", "i n"];

function gpt2Metadata(extra: Record<string, GgufValue> = {}): Map<string, GgufValue> {
  const tokens = [...SPECIALS, ...byteAlphabet(), ...MERGES.map((m) => m.replace(" ", ""))];
  return new Map<string, GgufValue>(
    Object.entries({
      "general.architecture": "llama",
      "llama.context_length": 8192,
      "tokenizer.ggml.model": "gpt2",
      "tokenizer.ggml.pre": "smollm",
      "tokenizer.ggml.tokens": tokens,
      "tokenizer.ggml.token_type": tokens.map((_, i) => (i < SPECIALS.length ? 3 : 1)),
      "tokenizer.ggml.merges": MERGES,
      "tokenizer.ggml.bos_token_id": 1,
      "tokenizer.ggml.eos_token_id": 2,
      "tokenizer.ggml.unknown_token_id": 0,
      "tokenizer.ggml.padding_token_id": 2,
      "tokenizer.ggml.add_bos_token": false,
      "tokenizer.chat_template": "{{ messages }}",
      ...extra,
    }),
  );
}

// biome-ignore lint/suspicious/noExplicitAny: reaching into generated JSON
type Json = any;

describe("byte-level (gpt2) tokenizer.json", () => {
  const files = buildTokenizerFiles(gpt2Metadata(), { modelMaxLength: 2048 });
  const json = files.tokenizerJson as Json;

  it("isolates digits, then splits with GPT-2's pattern, then maps bytes (smollm)", () => {
    expect(json.normalizer).toBeNull();
    expect(json.pre_tokenizer.type).toBe("Sequence");
    const [digits, words, bytes] = json.pre_tokenizer.pretokenizers;
    expect(digits).toEqual({
      type: "Split",
      pattern: { Regex: "\\p{N}" },
      behavior: "Isolated",
      invert: false,
    });
    expect(words.pattern.Regex).toBe(
      "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    );
    expect(bytes).toEqual({
      type: "ByteLevel",
      add_prefix_space: false,
      trim_offsets: true,
      use_regex: false,
    });
    expect(json.decoder.type).toBe("ByteLevel");
    expect(json.post_processor.type).toBe("ByteLevel");
  });

  it("keeps the vocabulary and merges in GGUF order", () => {
    expect(json.model.type).toBe("BPE");
    expect(json.model.vocab["<|im_start|>"]).toBe(1);
    expect(json.model.vocab.Ġthe).toBe(SPECIALS.length + 256 + 2);
    expect(json.model.merges).toEqual(MERGES.map((m) => m.split(" ")));
    expect(json.model.byte_fallback).toBe(false);
    expect(json.model.ignore_merges).toBe(false);
  });

  it("makes control tokens special added tokens", () => {
    expect(json.added_tokens).toEqual(
      SPECIALS.map((content, id) => ({
        id,
        content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      })),
    );
  });

  it("writes tokenizer_config.json with the special tokens and the chat template", () => {
    const config = files.tokenizerConfigJson as Json;
    expect(config).toMatchObject({
      add_bos_token: false,
      add_eos_token: false,
      bos_token: "<|im_start|>",
      eos_token: "<|im_end|>",
      pad_token: "<|im_end|>",
      unk_token: "<|endoftext|>",
      chat_template: "{{ messages }}",
      clean_up_tokenization_spaces: false,
      model_max_length: 2048,
      tokenizer_class: "GPT2Tokenizer",
    });
    expect(config.added_tokens_decoder["2"]).toMatchObject({ content: "<|im_end|>", special: true });
    expect(files.specialTokens).toEqual({
      bos: "<|im_start|>",
      eos: "<|im_end|>",
      pad: "<|im_end|>",
      unk: "<|endoftext|>",
      bosId: 1,
      eosId: 2,
      padId: 2,
      unkId: 0,
    });
    expect(files.chatTemplate).toBe("{{ messages }}");
  });

  it("falls back to the architecture's context length", () => {
    expect((buildTokenizerFiles(gpt2Metadata()).tokenizerConfigJson as Json).model_max_length).toBe(8192);
  });

  it("adds BOS/EOS through TemplateProcessing when the GGUF asks for them", () => {
    const md = gpt2Metadata({ "tokenizer.ggml.add_bos_token": true, "tokenizer.ggml.add_eos_token": true });
    const post = (buildTokenizerFiles(md).tokenizerJson as Json).post_processor;
    expect(post.type).toBe("TemplateProcessing");
    expect(post.single).toEqual([
      { SpecialToken: { id: "<|im_start|>", type_id: 0 } },
      { Sequence: { id: "A", type_id: 0 } },
      { SpecialToken: { id: "<|im_end|>", type_id: 0 } },
    ]);
    expect(post.special_tokens["<|im_start|>"]).toEqual({
      id: "<|im_start|>",
      ids: [1],
      tokens: ["<|im_start|>"],
    });
  });

  it("uses llama.cpp's per-type defaults (llama-bpe: ignore_merges, BOS unless the file says)", () => {
    const md = gpt2Metadata({ "tokenizer.ggml.pre": "llama-bpe" });
    md.delete("tokenizer.ggml.add_bos_token");
    const files = buildTokenizerFiles(md);
    expect((files.tokenizerJson as Json).model.ignore_merges).toBe(true);
    expect((files.tokenizerConfigJson as Json).add_bos_token).toBe(true);
    expect((files.tokenizerConfigJson as Json).clean_up_tokenization_spaces).toBe(true);
  });

  it("treats a missing pre type as llama.cpp's default", () => {
    const md = gpt2Metadata();
    md.delete("tokenizer.ggml.pre");
    const pre = (buildTokenizerFiles(md).tokenizerJson as Json).pre_tokenizer.pretokenizers;
    expect(pre.map((p: Json) => p.pattern?.Regex)).toEqual([
      "[\\p{P}\\$\\+<=>\\^~\\|]+",
      expect.stringContaining("'s|'t"),
      "\\p{N}+",
      "[0-9][0-9][0-9]",
      undefined,
    ]);
  });

  it("rejects an unknown pre type by name", () => {
    expect(() => buildTokenizerFiles(gpt2Metadata({ "tokenizer.ggml.pre": "mystery-bpe" }))).toThrow(
      /unsupported tokenizer\.ggml\.pre "mystery-bpe"/,
    );
  });

  it("rejects unsupported tokenizer models", () => {
    expect(() => buildTokenizerFiles(gpt2Metadata({ "tokenizer.ggml.model": "bert" }))).toThrow(
      /unsupported GGUF tokenizer model "bert"/,
    );
  });
});

describe("added tokens follow llama.cpp's token attributes", () => {
  function added(tokens: string[], types: number[], extra: Record<string, GgufValue> = {}): Json[] {
    const md = gpt2Metadata(extra);
    const base = md.get("tokenizer.ggml.tokens") as string[];
    md.set("tokenizer.ggml.tokens", [...base, ...tokens]);
    md.set("tokenizer.ggml.token_type", [...(md.get("tokenizer.ggml.token_type") as number[]), ...types]);
    return (buildTokenizerFiles(md).tokenizerJson as Json).added_tokens.filter(
      (t: Json) => t.id >= base.length,
    );
  }

  it("user-defined tokens split the text but are not special", () => {
    expect(added(["   ", "<tool>"], [4, 4]).map((t) => [t.content, t.special])).toEqual([
      ["   ", false],
      ["<tool>", false],
    ]);
  });

  it("unknown tokens are special; unused and byte tokens are not added", () => {
    expect(added(["<unk2>", "<unused0>", "<0x00>"], [2, 5, 6]).map((t) => t.content)).toEqual(["<unk2>"]);
  });

  it("end-of-generation names become special even when typed normal", () => {
    expect(added(["<|eot_id|>", "<end_of_turn>"], [1, 1]).map((t) => [t.content, t.special])).toEqual([
      ["<|eot_id|>", true],
      ["<end_of_turn>", true],
    ]);
  });

  it("fill-in-the-middle names become special only when their id key is absent", () => {
    expect(added(["<|fim_prefix|>"], [1]).map((t) => t.content)).toEqual(["<|fim_prefix|>"]);
    expect(added(["<|fim_prefix|>"], [1], { "tokenizer.ggml.fim_pre_token_id": 0 })).toEqual([]);
  });

  it("gpt-oss channel markers are user-defined", () => {
    expect(added(["<|channel|>"], [3]).map((t) => t.special)).toEqual([false]);
  });
});

describe("embedded tokenizer.huggingface.json", () => {
  it("is used verbatim", () => {
    const original = {
      version: "1.0",
      added_tokens: [{ id: 0, content: "<x>", special: true }],
      model: { type: "BPE" },
    };
    const files = buildTokenizerFiles(
      gpt2Metadata({ "tokenizer.huggingface.json": JSON.stringify(original) }),
    );
    expect(files.tokenizerJson).toEqual(original);
    expect((files.tokenizerConfigJson as Json).added_tokens_decoder["0"].content).toBe("<x>");
  });
});

describe("merges", () => {
  it("split at the first space after the first character and keep the first rank", () => {
    expect(parseMerges(["Ġ t", "  x", "a b c", "Ġ t", "nospace"])).toEqual([
      ["Ġ", "t"],
      [" ", "x"],
      ["a", "b c"],
    ]);
  });

  it("come from SentencePiece scores, best merged piece first", () => {
    const tokens = ["a", "b", "c", "ab", "bc", "abc"];
    const scores = [0, 0, 0, -3, -1, -2];
    expect(mergesFromScores(tokens, scores)).toEqual([
      ["b", "c"],
      ["a", "bc"],
      ["ab", "c"],
      ["a", "b"],
    ]);
  });

  it("keep a token spelled __proto__ through JSON", () => {
    const md = gpt2Metadata();
    md.set("tokenizer.ggml.tokens", [...(md.get("tokenizer.ggml.tokens") as string[]), "__proto__"]);
    md.set("tokenizer.ggml.token_type", [...(md.get("tokenizer.ggml.token_type") as number[]), 1]);
    const vocab = JSON.parse(JSON.stringify(buildTokenizerFiles(md).tokenizerJson)).model.vocab;
    expect(Object.hasOwn(vocab, "__proto__")).toBe(true);
  });
});

describe("SentencePiece (llama) tokenizer.json", () => {
  function spmMetadata(extra: Record<string, GgufValue> = {}): Map<string, GgufValue> {
    const bytes = Array.from(
      { length: 256 },
      (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`,
    );
    const tokens = ["<unk>", "<s>", "</s>", ...bytes, "▁", "h", "i", "▁h", "▁hi"];
    return new Map<string, GgufValue>(
      Object.entries({
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": tokens.map((_, i) => -i),
        "tokenizer.ggml.token_type": tokens.map((_, i) => (i === 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1)),
        ...extra,
      }),
    );
  }

  it("prefixes ▁, falls back to bytes and adds BOS, by llama.cpp's defaults", () => {
    const files = buildTokenizerFiles(spmMetadata());
    const json = files.tokenizerJson as Json;
    expect(json.normalizer.normalizers).toEqual([
      { type: "Prepend", prepend: "▁" },
      { type: "Replace", pattern: { String: " " }, content: "▁" },
    ]);
    expect(json.pre_tokenizer).toBeNull();
    expect(json.model).toMatchObject({ byte_fallback: true, unk_token: "<unk>", fuse_unk: true });
    expect(json.model.merges).toEqual([
      ["▁", "h"],
      ["▁h", "i"],
    ]);
    expect(json.post_processor.single[0]).toEqual({ SpecialToken: { id: "<s>", type_id: 0 } });
    expect(files.specialTokens).toMatchObject({ bosId: 1, eosId: 2, unkId: 0 });
    expect((files.tokenizerConfigJson as Json).tokenizer_class).toBe("LlamaTokenizerFast");
  });

  it("drops the prefix (and the decoder's strip) when add_space_prefix is false", () => {
    const json = buildTokenizerFiles(spmMetadata({ "tokenizer.ggml.add_space_prefix": false }))
      .tokenizerJson as Json;
    expect(json.normalizer).toEqual({ type: "Replace", pattern: { String: " " }, content: "▁" });
    expect(json.decoder.decoders.map((d: Json) => d.type)).toEqual(["Replace", "ByteFallback", "Fuse"]);
  });

  it("needs scores", () => {
    const md = spmMetadata();
    md.delete("tokenizer.ggml.scores");
    expect(() => buildTokenizerFiles(md)).toThrow(/no tokenizer\.ggml\.scores/);
  });
});
