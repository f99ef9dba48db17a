/**
 * Prompt tokenization in pieces (src/core/prompt/bounded-encode.ts) on the real SmolLM2 tokenizer:
 * the pieces' ids joined are the whole text's, encoding stops once past the limit, a truncated
 * prompt's suffix gives the whole text's last tokens, and the vocabulary's bytes-per-token bound
 * holds for every token of a text.
 */
import type { PreTrainedTokenizer } from "@huggingface/transformers";
import { beforeAll, describe, expect, it } from "vitest";
import { fromTransformersTokenizer } from "../../src/core/output/transformers-adapter.ts";
import {
  encodeBounded,
  type PieceEncoder,
  pieces,
  slicesExactly,
} from "../../src/core/prompt/bounded-encode.ts";
import { maxBytesPerToken } from "../../src/core/prompt/size-bound.ts";
import { loadTransformersTokenizer } from "../../src/core/runner/tokenizer.ts";
import { defaultModelDir, haveDefaultModel } from "../e2e/server-process.ts";

/** Prose with the chat template's special tokens, digits, code and non-ASCII text, about 60 KB. */
function corpus(): string {
  const paragraph =
    "<|im_start|>user\nThe keeper of the lighthouse counted 1,024 gulls in 2023; none of them (strangely) " +
    "ate the bread. Café au lait, naïve résumé — 東京タワー und Zürich. `for (let i = 0; i < n; i++) x += a[i];`\n" +
    "He said: \"don't, won't, can't\" and then    walked  away.\t\tTabs too.<|im_end|>\n";
  return Array.from({ length: 150 }, (_, i) => `${i} ${paragraph}`).join("");
}

describe.skipIf(!haveDefaultModel)("bounded prompt encoding (real tokenizer)", () => {
  let tok: PreTrainedTokenizer;
  let enc: PieceEncoder;
  const text = corpus();

  beforeAll(async () => {
    tok = await loadTransformersTokenizer(defaultModelDir);
    const encode = (t: string) => tok.encode(t, { add_special_tokens: false });
    enc = { encode, specials: { before: [], after: [] }, sliceable: slicesExactly(encode) };
  });

  it("cuts only where the tokens stay the same: pieces joined give the whole text's ids", () => {
    expect(enc.sliceable).toBe(true);
    const parts = [...pieces(text, 512)];
    expect(parts.length).toBeGreaterThan(50);
    expect(parts.join("")).toBe(text);
    expect(parts.flatMap((p) => enc.encode(p))).toEqual(enc.encode(text));
  });

  it("returns every id of a prompt that fits, and stops soon after the limit otherwise", () => {
    const whole = enc.encode(text);
    expect(encodeBounded(enc, text, false, { limit: whole.length, maxBytesPerToken: 81 })).toEqual({
      ids: whole,
    });
    const out = encodeBounded(enc, text, false, { limit: 1000, maxBytesPerToken: 81 });
    expect(out).toMatchObject({ exceeded: true });
    const atLeast = (out as { atLeast: number }).atLeast;
    expect(atLeast).toBeGreaterThan(1000);
    // One piece past the limit, not the whole text.
    expect(atLeast).toBeLessThan(whole.length / 2);
  });

  it("keeps a truncated prompt's last tokens from a suffix alone", () => {
    const whole = enc.encode(text);
    const bound = maxBytesPerToken(fromTransformersTokenizer(tok), false)!;
    const out = encodeBounded(enc, text, false, { limit: 0, keepLast: 300, maxBytesPerToken: bound });
    const ids = (out as { ids: number[] }).ids;
    expect(ids.length).toBeGreaterThanOrEqual(300);
    expect(ids.length).toBeLessThan(whole.length);
    expect(ids.slice(-300)).toEqual(whole.slice(-300));
  });

  it("bounds the tokens of a text by its bytes", () => {
    const bound = maxBytesPerToken(fromTransformersTokenizer(tok), false)!;
    expect(bound).toBeGreaterThan(1);
    for (const t of [text, "a".repeat(20_000), " ".repeat(5000), "=".repeat(3000)])
      expect(enc.encode(t).length).toBeGreaterThanOrEqual(Buffer.byteLength(t) / bound);
    expect(maxBytesPerToken(fromTransformersTokenizer(tok), true)).toBeUndefined();
  });

  it("a tokenizer whose pieces would differ is not sliced", () => {
    // Merging across the cut: a toy encoder that spells "a b" as one id.
    const encode = (t: string) => (t.includes("a b") ? [1] : [...t].map((c) => c.charCodeAt(0)));
    expect(slicesExactly(encode, ["a b"])).toBe(false);
  });
});
