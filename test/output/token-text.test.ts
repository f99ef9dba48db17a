import { beforeAll, describe, expect, it } from "vitest";
import { completedTokenText, tokenBytes, tokenLogprobText } from "../../src/core/output/token-text.ts";
import { byteVocab, hasModelTokenizer, loadModelTokenizer, type ModelTokenizer } from "./fixtures.ts";

const utf8 = (s: string) => [...new TextEncoder().encode(s)];

describe.skipIf(!hasModelTokenizer)("token text and bytes on the default model's tokenizer", () => {
  let model: ModelTokenizer;
  beforeAll(async () => {
    model = await loadModelTokenizer();
  });

  it("gives each token of a split emoji its raw bytes, which concatenate to the emoji's UTF-8", () => {
    const { tokenizer, encode } = model;
    const ids = encode("🦄");
    expect(ids.length).toBeGreaterThan(1);
    for (const id of ids) expect(tokenLogprobText(tokenizer, id, false)).toContain("\uFFFD");
    expect(ids.flatMap((id) => tokenBytes(tokenizer, id))).toEqual(utf8("🦄"));
  });

  it("gives bytes that concatenate to the UTF-8 of any text", () => {
    const { tokenizer, encode } = model;
    const text = "Party 🎉🦄 日本語 café\n\tnaïve <|im_end|> done";
    const ids = encode(text);
    expect(ids).toContain(2);
    expect(ids.flatMap((id) => tokenBytes(tokenizer, id))).toEqual(utf8(text));
  });

  it("decodes whole tokens as text, spaces and special tokens included", () => {
    const { tokenizer, encode } = model;
    const [hello] = encode(" hello");
    expect(tokenLogprobText(tokenizer, hello, false)).toBe(" hello");
    expect(tokenBytes(tokenizer, hello)).toEqual(utf8(" hello"));
    expect(tokenLogprobText(tokenizer, 2, false)).toBe("<|im_end|>");
    expect(tokenBytes(tokenizer, 2)).toEqual(utf8("<|im_end|>"));
  });

  it("writes token_id:<id> when tokens are returned as ids", () => {
    const { tokenizer, encode } = model;
    for (const id of [...encode("🦄 hi"), 2])
      expect(tokenLogprobText(tokenizer, id, true)).toBe(`token_id:${id}`);
  });

  it("answers the same from its cache", () => {
    const { tokenizer, encode } = model;
    const [id] = encode("🦄");
    expect(tokenBytes(tokenizer, id)).toBe(tokenBytes(tokenizer, id));
    expect(tokenLogprobText(tokenizer, id, false)).toBe(tokenLogprobText(tokenizer, id, false));
  });

  it("gives nothing for ids outside the vocabulary", () => {
    const { tokenizer } = model;
    expect(tokenLogprobText(tokenizer, tokenizer.vocabSize, false)).toBe("");
    expect(tokenBytes(tokenizer, tokenizer.vocabSize)).toEqual([]);
    expect(tokenLogprobText(tokenizer, -1, true)).toBe("token_id:-1");
  });

  it("attributes a split character to the token that completes it, given the preceding ids", () => {
    const { tokenizer, encode } = model;
    const ids = encode("a 🦄");
    const texts = ids.map((id, i) => completedTokenText(tokenizer, id, ids.slice(0, i)));
    // "a", then " " and the emoji's first bytes, then its other two bytes.
    expect(ids).toHaveLength(4);
    expect(texts).toEqual(["a", "", "", " 🦄"]);
  });
});

describe("token bytes without a byte-level alphabet", () => {
  it("falls back to the UTF-8 of the decoded token", () => {
    const vocab = byteVocab();
    expect(tokenBytes(vocab, 0x41)).toEqual([0x41]);
    expect(tokenBytes(vocab, 256)).toEqual(utf8("<a>"));
  });
});
