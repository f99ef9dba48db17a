/**
 * A chat whose last user message alone holds more tokens than the context is refused before its
 * template renders it (the size decides: no token stands for more than the tokenizer's longest
 * token's bytes); with truncate_prompt_tokens it is rendered and served as the request asks.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  chat,
  DEFAULT_MODEL,
  expectApiError,
  get,
  type Harness,
  startDefaultModelHarness,
} from "./harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await startDefaultModelHarness();
});
afterAll(() => h?.dispose());

async function rendered(): Promise<number> {
  const text = (await get(h, "/metrics", {})).text;
  const line = text
    .split("\n")
    .find((l) => l.startsWith('ortserve_template_renders_total{outcome="rendered"}'));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

const long = (n: number) => ({ role: "user", content: "word ".repeat(n) });

describe("an oversized chat prompt", () => {
  it("is refused by its size before rendering, naming messages and the context", async () => {
    expect(
      (await chat(h, { model: DEFAULT_MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 1 }))
        .status,
    ).toBe(200);
    const before = await rendered();
    const r = await chat(h, { model: DEFAULT_MODEL, messages: [long(400_000)], max_tokens: 1 });
    const e = expectApiError(r, 400, { param: "messages" });
    expect(e.message).toMatch(/maximum context length is 4096 tokens.*at least \d+/);
    expect(await rendered()).toBe(before);
  });

  it("with truncate_prompt_tokens is rendered and served", async () => {
    const before = await rendered();
    const r = await chat(h, {
      model: DEFAULT_MODEL,
      messages: [long(20_000)],
      max_tokens: 1,
      truncate_prompt_tokens: 64,
    });
    expect(r.status, r.text).toBe(200);
    expect((r.json as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBe(64);
    expect(await rendered()).toBe(before + 1);
  });
});
