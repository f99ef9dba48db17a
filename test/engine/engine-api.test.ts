/**
 * The in-process API on the real default model: the same pool, scheduler, runner and sampler the
 * server runs, reached without HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromTransformersTokenizer } from "../../src/core/output/transformers-adapter.ts";
import { loadTransformersTokenizer } from "../../src/core/runner/tokenizer.ts";
import { logSumExp, toLogprob } from "../../src/core/sample/ops/logprobs.ts";
import { argmax } from "../../src/core/sample/ops/select.ts";
import { Engine } from "../../src/engine/engine.ts";
import { ApiError } from "../../src/errors.ts";
import { hasModel, MODEL_DIR, MODEL_ID } from "../runner/model-fixture.ts";

describe.skipIf(!hasModel("q4"))("Engine (in-process API) on the default model", () => {
  let engine: Engine;
  let decode: (ids: number[]) => string;
  let encode: (text: string) => number[];
  beforeAll(async () => {
    engine = await Engine.open({ workers: 1, threads: 2 });
    const tok = await loadTransformersTokenizer(MODEL_DIR);
    const like = fromTransformersTokenizer(tok);
    decode = (ids) => like.decode(ids, { skipSpecialTokens: true });
    encode = (text) => tok.encode(text, { add_special_tokens: false });
  });
  afterAll(async () => {
    await engine?.close();
  });

  const chat = (content: string, maxTokens: number, extra = {}) => ({
    model: MODEL_ID,
    prompt: { messages: [{ role: "user", content }] },
    params: { maxTokens, sampling: { temperature: 0, ...extra } },
  });

  it("streams a chat reply that ends at EOS or maxTokens", async () => {
    const deltas: string[] = [];
    const out = await engine.generate(chat("What is the capital of France? Answer in one sentence.", 48), {
      onEvent: (e) => {
        if (e.type === "delta") deltas.push(e.text);
      },
    });
    const c = out.choices[0]!;
    const text = deltas.join("");
    expect(text).toBe(c.text);
    expect(text.trim().length).toBeGreaterThan(0);
    expect(text).not.toContain("\uFFFD");
    expect(text).not.toContain("<|im_end|>");
    expect(c.tokenIds.length).toBeLessThanOrEqual(48);
    if (c.finishReason === "length") expect(c.tokenIds).toHaveLength(48);
    else expect(c.finishReason).toBe("stop");
    expect(text).toBe(decode(c.tokenIds));
    expect(out.promptTokenIds.length).toBeGreaterThan(10);
  });

  it("stops after maxTokens", async () => {
    const out = await engine.generate(chat("Write a long story about a dragon.", 5));
    expect(out.choices[0]!.finishReason).toBe("length");
    expect(out.choices[0]!.tokenIds).toHaveLength(5);
    expect(out.choices[0]!.text.length).toBeGreaterThan(0);
  });

  it("stops at a stop token id and keeps it as the last token", async () => {
    const free = await engine.generate(chat("Name three colours.", 4, { ignoreEos: true }));
    const ids = free.choices[0]!.tokenIds;
    const stopped = await engine.generate(chat("Name three colours.", 4, { stopTokenIds: [ids[1]!] }));
    expect(stopped.choices[0]!.tokenIds).toEqual(ids.slice(0, 2));
    expect(stopped.choices[0]!.stopReason).toBe(ids[1]);
  });

  it("text, token-id and chat prompts of the same tokens give the same output", async () => {
    // Each computes its whole prompt: a prefix-cache hit changes how the q4 graph's int8
    // activations are chunked, which may flip a near tie (covered in engine.test.ts on fp32).
    const params = (cacheSalt: string) => ({ maxTokens: 6, cacheSalt, sampling: { temperature: 0 } });
    const prepared = await engine.prepare({ ...chat("Say hello.", 6), params: params("a") });
    const text = (prepared.request.prompt as { text: string }).text;
    expect(text).toContain("<|im_start|>user");
    const a = await engine.generate(prepared);
    const b = await engine.generate({
      model: MODEL_ID,
      prompt: { text, addSpecialTokens: false },
      params: params("b"),
    });
    const c = await engine.generate({
      model: MODEL_ID,
      prompt: { tokenIds: encode(text) },
      params: params("c"),
    });
    expect(b.choices[0]!.tokenIds).toEqual(a.choices[0]!.tokenIds);
    expect(c.choices[0]!.tokenIds).toEqual(a.choices[0]!.tokenIds);
    expect(c.promptTokenIds).toEqual(a.promptTokenIds);
  });

  it("scores a prompt: each token's logprob is the log-softmax of the previous position's logits", async () => {
    const tokens = encode("The capital of France is Paris.");
    const s = await engine.score({
      model: MODEL_ID,
      prompt: { tokenIds: tokens },
      topLogprobs: 2,
      logits: true,
    });
    expect(s.promptTokenIds).toEqual(tokens);
    expect(s.logits!.length).toBe(tokens.length * s.vocabSize);
    expect(s.promptLogprobs[0]).toBeNull();
    expect(s.promptLogprobs).toHaveLength(tokens.length);
    for (let i = 1; i < tokens.length; i++) {
      const row = s.logits!.subarray((i - 1) * s.vocabSize, i * s.vocabSize);
      const entry = s.promptLogprobs[i]!.entries;
      expect(entry[0]!.tokenId).toBe(tokens[i]);
      expect(entry[0]!.logprob).toBeCloseTo(toLogprob(row[tokens[i]!]!, logSumExp(row)), 4);
      // The first alternative listed is the row's argmax (or the token itself, listed once).
      const best = argmax(row);
      expect(entry.some((e) => e.tokenId === best)).toBe(true);
    }
  });

  it("the greedy continuation follows the scored logits' argmax", async () => {
    const tokens = encode("One, two, three, four,");
    const s = await engine.score({ model: MODEL_ID, prompt: { tokenIds: tokens }, logits: true });
    const last = s.logits!.subarray((tokens.length - 1) * s.vocabSize);
    const g = await engine.generate({
      model: MODEL_ID,
      prompt: { tokenIds: tokens },
      params: { maxTokens: 1, sampling: { temperature: 0 } },
    });
    expect(g.choices[0]!.tokenIds[0]).toBe(argmax(last));
  });

  it("reports bad requests as the API's errors, and a request that fails setup fails alone", async () => {
    await expect(engine.generate(chat("hi", 4), {}).then(() => "ok")).resolves.toBe("ok");
    const unknown = engine.generate({ ...chat("hi", 4), model: "no-such-model" });
    await expect(unknown).rejects.toMatchObject({ status: 404 });
    await expect(
      engine.prepare({ ...chat("hi", 4), params: { n: 2, sampling: { temperature: 0 } } }),
    ).rejects.toThrow(ApiError);
    const good = engine.generate(chat("Count to five.", 12));
    const bad = engine.generate({
      model: MODEL_ID,
      prompt: { tokenIds: [1, 10_000_000] },
      params: { maxTokens: 3 },
    });
    await expect(bad).rejects.toMatchObject({ status: 400 });
    expect((await good).choices[0]!.tokenIds.length).toBeGreaterThan(0);
  });
});
