/** Reasoning apart from the answer: whole outputs, and the same outputs cut into every delta split. */
import { describe, expect, it } from "vitest";
import {
  promptOpensThinking,
  type ReasoningPart,
  splitReasoning,
  startsInReasoning,
  ThinkStreamParser,
} from "../../src/protocol/reasoning/think-parser.ts";

/** Streams `deltas` and joins each kind, as a client joining stream chunks would. */
function streamed(deltas: string[], opened: boolean): { reasoning: string; content: string } {
  const p = new ThinkStreamParser(opened);
  const parts: ReasoningPart[] = [...deltas.flatMap((d) => p.push(d)), ...p.finish()];
  const join = (k: ReasoningPart["kind"]) =>
    parts
      .filter((x) => x.kind === k)
      .map((x) => x.text)
      .join("");
  for (const part of parts) expect(part.text).not.toBe("");
  return { reasoning: join("reasoning"), content: join("content") };
}

const CASES: [string, boolean, string | null, string | null][] = [
  // output, starts in reasoning, reasoning, content
  ["<think>a plan</think>\n\nThe answer.", false, "a plan", "\n\nThe answer."],
  ["  <think>a plan</think>answer", false, "a plan", "answer"],
  ["a plan</think>answer", true, "a plan", "answer"],
  ["<think>a plan</think>answer", true, "a plan", "answer"],
  ["just an answer", false, null, "just an answer"],
  ["just an answer with </think> inside", false, null, "just an answer with </think> inside"],
  ["<think>never closed", false, "never closed", null],
  ["thinking to the end", true, "thinking to the end", null],
  ["<think></think>answer", false, "", "answer"],
  ["<think>x</think>a <think>y</think> b", false, "x", "a <think>y</think> b"],
  ["<thinking is not a tag", false, null, "<thinking is not a tag"],
  ["<thi", false, null, "<thi"],
  ["plan</thin", true, "plan</thin", null],
  ["", false, null, ""],
];

describe("the think-tag reasoning parser", () => {
  it.each(CASES)("splits %j (opened %s)", (output, opened, reasoning, content) => {
    expect(splitReasoning(output, opened)).toEqual({ reasoning, content });
  });

  it("gives the same split for every way of cutting the output into two or three deltas", () => {
    for (const [output, opened, reasoning, content] of CASES) {
      const want = { reasoning: reasoning ?? "", content: content ?? "" };
      for (let i = 0; i <= output.length; i++) {
        expect(streamed([output.slice(0, i), output.slice(i)], opened)).toEqual(want);
        for (let j = i; j <= output.length; j++)
          expect(streamed([output.slice(0, i), output.slice(i, j), output.slice(j)], opened)).toEqual(want);
      }
    }
  });

  it("streams one character at a time, holding back only what may be a tag", () => {
    const p = new ThinkStreamParser(false);
    const seen = [..."<think>ab</think>cd"].map((ch) => p.push(ch));
    expect(seen.slice(0, 7).flat()).toEqual([]);
    expect(seen[7]).toEqual([{ kind: "reasoning", text: "a" }]);
    expect(seen.at(-1)).toEqual([{ kind: "content", text: "d" }]);
  });

  it("reads from the prompt whether the output starts in reasoning", () => {
    const r1 = "<｜User｜>hi<｜Assistant｜><think>\n";
    const qwen3Off = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    expect(promptOpensThinking(r1)).toBe(true);
    expect(promptOpensThinking(qwen3Off)).toBe(false);
    expect(promptOpensThinking("<|im_start|>assistant\n")).toBe(false);
    expect(startsInReasoning("qwen3", qwen3Off)).toBe(false);
    expect(startsInReasoning("qwen3", r1)).toBe(true);
    expect(startsInReasoning("deepseek_r1", "<|im_start|>assistant\n")).toBe(true);
  });
});
