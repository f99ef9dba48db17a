import { beforeAll, describe, expect, it } from "vitest";
import { SequenceText, type SequenceTextOptions } from "../../src/core/output/sequence-text.ts";
import type { TokenizerLike } from "../../src/core/output/tokenizer-like.ts";
import {
  byteVocab,
  hasModelTokenizer,
  loadModelTokenizer,
  type ModelTokenizer,
  utf8Ids,
} from "./fixtures.ts";

/** Generated ids in, the text a client would receive out; `stopToken` marks the last id. */
function generate(tokenizer: TokenizerLike, ids: number[], options: SequenceTextOptions, stopToken = false) {
  const seq = new SequenceText(tokenizer, options);
  const deltas: string[] = [];
  let stop: string | undefined;
  for (const [i, id] of ids.entries()) {
    const step = seq.push(id, stopToken && i === ids.length - 1);
    deltas.push(step.text);
    if (step.stop !== undefined) {
      stop = step.stop;
      break;
    }
  }
  deltas.push(seq.finish());
  return { text: deltas.join(""), deltas, stop };
}

describe.skipIf(!hasModelTokenizer)("SequenceText on the default model's tokenizer", () => {
  let model: ModelTokenizer;
  beforeAll(async () => {
    model = await loadModelTokenizer();
  });

  it("leaves the stop token out of the text unless stop strings are included", () => {
    const { tokenizer, encode } = model;
    const ids = encode("Hi 🦄<|im_end|>");
    expect(generate(tokenizer, ids, { skipSpecialTokens: false }, true).text).toBe("Hi 🦄");
    const included = generate(
      tokenizer,
      ids,
      { skipSpecialTokens: false, includeStopStrInOutput: true },
      true,
    );
    expect(included.text).toBe("Hi 🦄<|im_end|>");
  });

  it("cuts at a stop string spanning tokens and reports it", () => {
    const { tokenizer, encode } = model;
    const ids = encode("The answer is 42. Next question");
    const r = generate(tokenizer, ids, { stop: ["42. N"] });
    expect(r).toMatchObject({ text: "The answer is ", stop: "42. N" });
    for (let i = 1; i <= r.deltas.length; i++)
      expect(r.text.startsWith(r.deltas.slice(0, i).join(""))).toBe(true);
  });

  it("drops an unfinished character at the end, as vLLM does", () => {
    const { tokenizer, encode } = model;
    const ids = encode("ok 🦄").slice(0, -1);
    expect(generate(tokenizer, ids, {}).text).toBe("ok");
  });
});

describe("SequenceText rules", () => {
  it("ignores stop strings that end within the first minTokens tokens", () => {
    const ids = utf8Ids("abcabc");
    expect(generate(byteVocab(), ids, { stop: ["ab"], minTokens: 2 })).toMatchObject({
      text: "abc",
      stop: "ab",
    });
    expect(generate(byteVocab(), ids, { stop: ["ab"], minTokens: 1 })).toMatchObject({
      text: "",
      stop: "ab",
    });
    // A stop may begin before minTokens and end after it.
    expect(generate(byteVocab(), ids, { stop: ["bc"], minTokens: 2 })).toMatchObject({
      text: "a",
      stop: "bc",
    });
  });

  it("holds back stop prefixes while streaming and releases them at the end", () => {
    const r = generate(byteVocab(), utf8Ids("x<y"), { stop: ["<yes>"] });
    expect(r.deltas).toEqual(["", "", "", "x<y"]);
    expect(r.stop).toBeUndefined();
  });
});
