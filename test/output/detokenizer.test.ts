import { beforeAll, describe, expect, it } from "vitest";
import { type DetokenizerOptions, IncrementalDetokenizer } from "../../src/core/output/detokenizer.ts";
import type { TokenizerLike } from "../../src/core/output/tokenizer-like.ts";
import {
  byteVocab,
  hasModelTokenizer,
  loadModelTokenizer,
  type ModelTokenizer,
  utf8Ids,
} from "./fixtures.ts";

/** Every push's return value, then the flush. */
function stream(tokenizer: TokenizerLike, ids: readonly number[], options?: DetokenizerOptions) {
  const detok = new IncrementalDetokenizer(tokenizer, options);
  const deltas = ids.map((id) => detok.push(id));
  return { deltas, tail: detok.flush() };
}

describe.skipIf(!hasModelTokenizer)("IncrementalDetokenizer on the default model's tokenizer", () => {
  let model: ModelTokenizer;
  beforeAll(async () => {
    model = await loadModelTokenizer();
  });

  it.each([
    ["emoji", "Party time 🎉🦄 and a family 👨‍👩‍👧 plus ☕"],
    ["CJK", "日本語のテキストと中文文本，混在しています。"],
    ["accents", "Crème brûlée, naïve café, Ångström, œuvre, Dvořák"],
  ])("streams %s token by token to the text of a full decode, never emitting U+FFFD", (_, text) => {
    const { tokenizer, encode } = model;
    const ids = encode(text);
    // The point: some tokens hold only part of a character.
    expect(ids.some((id) => tokenizer.decode([id], { skipSpecialTokens: true }).includes("\uFFFD"))).toBe(
      true,
    );
    const { deltas, tail } = stream(tokenizer, ids);
    expect(deltas.filter((d) => d === "").length).toBeGreaterThan(0);
    for (const d of deltas) expect(d).not.toContain("\uFFFD");
    expect(tail).toBe("");
    expect(deltas.join("")).toBe(tokenizer.decode(ids, { skipSpecialTokens: true }));
    expect(deltas.join("")).toBe(text);
  });

  it("decodes the first generated token in the context of the prompt without emitting the prompt", () => {
    const { tokenizer, encode } = model;
    const promptIds = encode("<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n");
    const ids = encode(" Hello 🦄!");
    const { deltas } = stream(tokenizer, ids, { promptIds });
    expect(deltas.join("")).toBe(" Hello 🦄!");
  });

  it("drops special tokens by default and keeps them with skipSpecialTokens false", () => {
    const { tokenizer, encode } = model;
    const ids = encode("Hi there<|im_end|>\n<|im_start|>user");
    expect(ids).toContain(2);
    expect(stream(tokenizer, ids).deltas.join("")).toBe("Hi there\nuser");
    const kept = stream(tokenizer, ids, { skipSpecialTokens: false }).deltas;
    expect(kept.join("")).toBe("Hi there<|im_end|>\n<|im_start|>user");
    expect(kept).toContain("<|im_end|>");
  });

  it("never puts spaces between special tokens of a byte-level vocabulary, whatever spacesBetweenSpecialTokens says", () => {
    const { tokenizer, encode } = model;
    const ids = encode("a<|im_start|><|im_end|><|endoftext|>b");
    for (const spacesBetweenSpecialTokens of [true, false]) {
      const { deltas } = stream(tokenizer, ids, { skipSpecialTokens: false, spacesBetweenSpecialTokens });
      expect(deltas.join("")).toBe("a<|im_start|><|im_end|><|endoftext|>b");
    }
  });

  it("decodes a bounded window per token", () => {
    const { tokenizer, encode } = model;
    let decodedIds = 0;
    const counting: TokenizerLike = {
      ...tokenizer,
      decode: (ids, options) => {
        decodedIds += ids.length;
        return tokenizer.decode(ids, options);
      },
    };
    const ids = encode("Streaming 日本語 and 🎉 emoji, over and over. ".repeat(100));
    const { deltas } = stream(counting, ids);
    expect(deltas.join("")).toBe(tokenizer.decode(ids, { skipSpecialTokens: true }));
    expect(decodedIds / ids.length).toBeLessThan(10);
  });
});

describe("IncrementalDetokenizer rules", () => {
  it("holds an incomplete character back until its last byte arrives", () => {
    expect(stream(byteVocab(), utf8Ids("a😀b")).deltas).toEqual(["a", "", "", "", "😀", "b"]);
  });

  it("never emits U+FFFD for valid text split into bytes, and streams the full text", () => {
    const text = "héllo 🎉 wörld 👩‍👩‍👧 done";
    const { deltas, tail } = stream(byteVocab(), utf8Ids(text));
    for (const d of deltas) expect(d).not.toContain("\uFFFD");
    expect(deltas.join("") + tail).toBe(text);
  });

  it("emits U+FFFD for bytes that stay invalid once more text follows", () => {
    const ids = [0x61, 0x80, 0xff, 0x62];
    expect(stream(byteVocab(), ids).deltas).toEqual(["a", "", "", "\uFFFD\uFFFDb"]);
  });

  it("holds an unfinished character at the end; flush returns it as a full decode shows it", () => {
    const { deltas, tail } = stream(byteVocab(), utf8Ids("ok😀").slice(0, 4));
    expect(deltas.join("")).toBe("ok");
    expect(tail).toBe("\uFFFD");
  });

  it("emits an added token after another one bare when spaces between special tokens are off", () => {
    // A decoder that puts a space in front of added tokens, like SentencePiece ones.
    const vocab = byteVocab({ addedTokenSeparator: " " });
    const ids = [0x78, 256, 257, 258, 0x79];
    const spaced = stream(vocab, ids, { skipSpecialTokens: false }).deltas;
    expect(spaced).toEqual(["x", " <a>", " <b>", " [x]", "y"]);
    const bare = stream(vocab, ids, { skipSpecialTokens: false, spacesBetweenSpecialTokens: false }).deltas;
    expect(bare).toEqual(["x", " <a>", "<b>", "[x]", "y"]);
    // Skipping special tokens turns the rule off.
    const skipped = stream(vocab, ids, { spacesBetweenSpecialTokens: false }).deltas;
    expect(skipped).toEqual(["x", "", "", " [x]", "y"]);
  });

  it("restarts at the current token when the text stops extending the emitted text", () => {
    // A decoder that rewrites earlier text (" ." → "."), which DecodeStream reports as an invalid prefix.
    const base = byteVocab();
    const rewriting: TokenizerLike = {
      ...base,
      decode: (ids, options) => base.decode(ids, options).replaceAll(" .", "."),
    };
    expect(stream(rewriting, utf8Ids("a .b")).deltas).toEqual(["a", " ", "", "b"]);
  });
});
