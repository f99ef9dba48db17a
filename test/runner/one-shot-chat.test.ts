import { describe, expect, it } from "vitest";
import { runOneShotChat } from "../../src/core/runner/one-shot-chat.ts";
import { loadTokenizer } from "../../src/core/runner/tokenizer.ts";
import { hasModel, MODEL_DIR } from "./model-fixture.ts";

describe.skipIf(!hasModel("q4"))("runOneShotChat", () => {
  it("streams a reply that ends at EOS or maxTokens", async () => {
    const deltas: string[] = [];
    const result = await runOneShotChat(MODEL_DIR, "What is the capital of France? Answer in one sentence.", {
      maxTokens: 48,
      onText: (d) => deltas.push(d),
    });
    const text = deltas.join("");
    expect(text.trim().length).toBeGreaterThan(0);
    expect(text).not.toContain("\uFFFD");
    expect(text).not.toContain("<|im_end|>");
    expect(result.tokenIds.length).toBeLessThanOrEqual(48);
    if (result.finishReason === "length") expect(result.tokenIds).toHaveLength(48);
    const tok = await loadTokenizer(MODEL_DIR);
    expect(text).toBe(tok.decode(result.tokenIds));
  });

  it("stops after maxTokens", async () => {
    let text = "";
    const result = await runOneShotChat(MODEL_DIR, "Write a long story about a dragon.", {
      maxTokens: 5,
      onText: (d) => {
        text += d;
      },
    });
    expect(result.finishReason).toBe("length");
    expect(result.tokenIds).toHaveLength(5);
    expect(text.length).toBeGreaterThan(0);
  });
});
