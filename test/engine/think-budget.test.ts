/**
 * A thinking budget through the in-process Engine on the real SmolLM2 weights: a prompt that opens a
 * think block, greedy decoding with the model's `</` pushed away so it never closes the block by
 * itself. With a budget of N the output is the unbudgeted output's first N tokens, then the close
 * text as the tokenizer spells it, then the answer; a JSON schema behind the block still binds the
 * answer; usage's reasoning tokens count the block.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GenerateParams } from "../../src/core/request-defaults.ts";
import { loadTransformersTokenizer } from "../../src/core/runner/tokenizer.ts";
import type { LogitBias } from "../../src/core/sample/params.ts";
import { Engine } from "../../src/engine/engine.ts";
import { DIGIT_ANSWER_SCHEMA, isDigitAnswer } from "../fixtures/digit-answer.ts";
import { hasModel, MODEL_DIR, MODEL_ID } from "../runner/model-fixture.ts";

const PROMPT =
  "<|im_start|>user\nWhy is the sky blue? Think step by step.<|im_end|>\n<|im_start|>assistant\n<think>\n";
const CLOSE = "</think>\n\n";

describe.skipIf(!hasModel("q4"))("a thinking budget in the engine", () => {
  let engine: Engine;
  let encode: (text: string) => number[];
  let noClose: LogitBias;
  beforeAll(async () => {
    engine = await Engine.open({ workers: 1, threads: 2 });
    const tok = await loadTransformersTokenizer(MODEL_DIR);
    encode = (text) => tok.encode(text, { add_special_tokens: false });
    // Every token that starts a closing tag is pushed away: the model would think to the end.
    const starts = new Set<number>();
    for (let id = 0; id < 49152; id++) {
      const t = tok.decode([id], { skip_special_tokens: false });
      if (t.trimStart().startsWith("</")) starts.add(id);
    }
    noClose = { ids: [...starts], biases: [...starts].map(() => -100) };
  });
  afterAll(async () => {
    await engine?.close();
  });

  const run = (params: GenerateParams) =>
    engine.generate({
      model: MODEL_ID,
      prompt: { text: PROMPT },
      params: {
        maxTokens: 40,
        ...params,
        sampling: { temperature: 0, logitBias: noClose, ...params.sampling },
      },
    });

  it("closes the block after N sampled tokens with the close text, then the answer goes on", async () => {
    const free = (await run({ reasoning: { opened: true } })).choices[0]!;
    expect(free.text).not.toContain("</think>");
    // Without a budget every token is reasoning.
    expect(free.reasoningTokens).toBe(free.tokenIds.length);
    const closeIds = encode(CLOSE);
    for (const n of [0, 1, 7]) {
      const c = (await run({ reasoning: { opened: true, budget: { tokens: n, closeText: CLOSE } } }))
        .choices[0]!;
      expect(c.tokenIds.slice(0, n)).toEqual(free.tokenIds.slice(0, n));
      expect(c.tokenIds.slice(n, n + closeIds.length)).toEqual(closeIds);
      const at = c.text.indexOf("</think>");
      expect(at).toBeGreaterThanOrEqual(0);
      // The answer continues after the forced close.
      expect(c.tokenIds.length).toBeGreaterThan(n + closeIds.length);
      const closeTagTokens = encode("</think>").length;
      expect(c.reasoningTokens).toBeGreaterThanOrEqual(n + closeTagTokens);
      expect(c.reasoningTokens).toBeLessThanOrEqual(n + closeIds.length);
    }
  });

  it("a JSON schema behind the block binds the answer after the forced close", async () => {
    const schema = DIGIT_ANSWER_SCHEMA;
    for (const anyWhitespace of [false, true]) {
      const c = (
        await run({
          maxTokens: 60,
          reasoning: { opened: true, budget: { tokens: 5, closeText: CLOSE } },
          constraint: {
            kind: "json_schema",
            schema: JSON.stringify(schema),
            anyWhitespace,
            afterThinking: { opened: true },
          },
        })
      ).choices[0]!;
      const at = c.text.indexOf("</think>");
      expect(at, c.text).toBeGreaterThanOrEqual(0);
      expect(c.finishReason, c.text).toBe("stop");
      const answer = JSON.parse(c.text.slice(at + "</think>".length));
      expect(isDigitAnswer(answer), c.text).toBe(true);
    }
  });

  it("an unopened block that the output never opens has no reasoning tokens and no forcing", async () => {
    const free = (await run({ maxTokens: 12 })).choices[0]!;
    const c = (
      await run({ maxTokens: 12, reasoning: { opened: false, budget: { tokens: 0, closeText: CLOSE } } })
    ).choices[0]!;
    expect(c.tokenIds).toEqual(free.tokenIds);
    expect(c.reasoningTokens).toBe(0);
  });
});
