/**
 * The think block followed token by token: tokens stand for their bytes here (ids are positions in
 * the list of pieces), so tags split across tokens, an output that opens its own block, the
 * UTF-8 wait before forcing and the budget's count can be driven exactly.
 */
import { describe, expect, it } from "vitest";
import { ThinkBlock } from "../../src/core/step/think-block.ts";

const CLOSE_IDS = [900, 901];

/** Feeds the pieces (as token ids 0, 1, …) and returns the token forced after each. */
function feed(block: ThinkBlock, pieces: (string | Buffer)[]): (number | undefined)[] {
  return pieces.map((p, i) => {
    block.push(i, [...(typeof p === "string" ? Buffer.from(p) : p)]);
    return block.forcedNext();
  });
}

describe("ThinkBlock", () => {
  it("an opened block ends at a close tag split over tokens, and counts its tokens with the tag", () => {
    const b = new ThinkBlock(true);
    feed(b, ["Hmm", " ok </", "thi", "nk>", "answer", " more"]);
    expect(b.phase).toBe("answer");
    expect(b.reasoningTokens).toBe(4);
  });

  it("an output that opens with <think> (after whitespace) opens the block; anything else is the answer", () => {
    const opens = new ThinkBlock(false);
    feed(opens, ["\n", "<th", "ink>", "why", "</think>", "x"]);
    expect(opens.phase).toBe("answer");
    expect(opens.reasoningTokens).toBe(5);
    const answers = new ThinkBlock(false);
    feed(answers, ["<th", "is", "<think>"]);
    expect(answers.phase).toBe("answer");
    expect(answers.reasoningTokens).toBe(0);
  });

  it("a budget of N forces the close after N tokens inside the block, and the forced tokens spend nothing", () => {
    const b = new ThinkBlock(false, { tokens: 2, closeIds: CLOSE_IDS });
    const forced = feed(b, ["<think>", "a", "b"]);
    expect(forced).toEqual([undefined, undefined, 900]);
    b.push(900, [...Buffer.from("</thi")]);
    expect(b.forcedNext()).toBe(901);
    b.push(901, [...Buffer.from("nk>\n")]);
    expect(b.forcedNext()).toBeUndefined();
    expect(b.phase).toBe("answer");
    expect(b.reasoningTokens).toBe(5);
  });

  it("a budget of 0 on an opened block forces at once", () => {
    expect(new ThinkBlock(true, { tokens: 0, closeIds: CLOSE_IDS }).forcedNext()).toBe(900);
  });

  it("waits for a UTF-8 character to complete before forcing (llama.cpp's rule)", () => {
    const b = new ThinkBlock(true, { tokens: 1, closeIds: CLOSE_IDS });
    const euro = Buffer.from("€");
    const forced = feed(b, [euro.subarray(0, 1), euro.subarray(1)]);
    expect(forced).toEqual([undefined, 900]);
  });

  it("a token other than the forced one ends the forcing for good", () => {
    const b = new ThinkBlock(true, { tokens: 1, closeIds: CLOSE_IDS });
    feed(b, ["a"]);
    expect(b.forcedNext()).toBe(900);
    b.push(5, [...Buffer.from("b")]);
    expect(b.forcedNext()).toBeUndefined();
    b.push(6, [...Buffer.from("c")]);
    expect(b.forcedNext()).toBeUndefined();
    expect(b.phase).toBe("thinking");
  });
});
