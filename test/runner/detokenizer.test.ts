import { describe, expect, it } from "vitest";
import { IncrementalDetokenizer } from "../../src/core/runner/detokenizer.ts";
import { loadTokenizer } from "../../src/core/runner/tokenizer.ts";
import { hasModel, MODEL_DIR } from "./model-fixture.ts";

/** A byte-level vocabulary: each id is one byte, decoded like a BPE tokenizer does. */
const utf8 = new TextDecoder();
const byteDecode = (ids: readonly number[]) => utf8.decode(new Uint8Array(ids));
const bytesOf = (s: string) => [...new TextEncoder().encode(s)];

function stream(detok: IncrementalDetokenizer, ids: readonly number[]): string[] {
  const deltas = ids.map((id) => detok.push(id)).filter((d) => d !== "");
  const tail = detok.flush();
  return tail ? [...deltas, tail] : deltas;
}

describe("IncrementalDetokenizer", () => {
  it("holds back a 4-byte emoji until its last byte arrives", () => {
    const detok = new IncrementalDetokenizer(byteDecode);
    const ids = bytesOf("a😀b");
    const pushed = ids.map((id) => detok.push(id));
    expect(pushed).toEqual(["a", "", "", "", "😀", "b"]);
  });

  it("never emits U+FFFD and reproduces the full text", () => {
    const text = "héllo 🎉 wörld 👩‍👩‍👧 done";
    const deltas = stream(new IncrementalDetokenizer(byteDecode), bytesOf(text));
    for (const d of deltas) expect(d).not.toContain("\uFFFD");
    expect(deltas.join("")).toBe(text);
  });

  it("flushes an incomplete character at the end", () => {
    const detok = new IncrementalDetokenizer(byteDecode);
    const ids = bytesOf("😀").slice(0, 2);
    expect(ids.map((id) => detok.push(id)).join("")).toBe("");
    expect(detok.flush()).toBe("\uFFFD");
  });
});

describe.skipIf(!hasModel("q4"))("IncrementalDetokenizer with the model tokenizer", () => {
  it("streams emoji split across tokens without U+FFFD", async () => {
    const tok = await loadTokenizer(MODEL_DIR);
    const text = "Party time 🎉🦄 and a family 👨‍👩‍👧 plus ☕ 日本語";
    const ids = tok.encode(text);
    // The point of the test: at least one token is an incomplete UTF-8 sequence on its own.
    expect(ids.some((id) => tok.decode([id]).includes("\uFFFD"))).toBe(true);
    const deltas = stream(new IncrementalDetokenizer(tok.decode), ids);
    for (const d of deltas) expect(d).not.toContain("\uFFFD");
    expect(deltas.join("")).toBe(tok.decode(ids));
    expect(deltas.join("")).toBe(text);
  });
});
