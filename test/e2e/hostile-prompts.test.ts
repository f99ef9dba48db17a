/**
 * Hostile requests beside a running stream, on a real server process and the real default model,
 * through the official `openai` client: 5 MB of one character, 3 MB of words, a 100,000-id token
 * prompt, a 50,000-entry logit_bias and 1,000 stop strings of 1 KB are each refused (or served)
 * while the stream keeps coming. The one timing bound is deliberately generous (2 s between two
 * chunks; before prompts were tokenized off the engine's thread, a 5 MB prompt held the stream
 * for about 30 s), so a slow or shared CI machine does not trip it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { modelsDir } from "../../src/util/paths.ts";
import { DEFAULT_MODEL, haveDefaultModel, type ServerProcess, startServerProcess } from "./server-process.ts";

const KEY = "e2e-hostile-key-0123456789abcdef";
const GAP_BOUND_MS = 2000;

describe.skipIf(!haveDefaultModel)("hostile prompts beside a stream", () => {
  let root: string;
  let server: ServerProcess;
  let client: OpenAI;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "ortserve-e2e-hostile-"));
    server = await startServerProcess({
      modelsDir: modelsDir(),
      dbPath: join(root, "ortserve.db"),
      apiKey: KEY,
    });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120_000 });
  });

  afterAll(async () => {
    await server?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  /** The status of a request the client refused, or 200. */
  const status = (p: Promise<unknown>) =>
    p.then(
      () => 200,
      (e: unknown) => (e instanceof OpenAI.APIError ? (e.status ?? 0) : -1),
    );
  const say = (content: string) => [{ role: "user" as const, content }];

  it("refuses them without holding the stream", async () => {
    // The model loads on its first request.
    await client.chat.completions.create({ model: DEFAULT_MODEL, messages: say("hi"), max_tokens: 1 });
    const stream = await client.chat.completions.create({
      model: DEFAULT_MODEL,
      messages: say("Tell a long story about a lighthouse keeper."),
      max_tokens: 120,
      min_tokens: 120,
      stream: true,
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const gaps: number[] = [];
    const reading = (async () => {
      let last: number | undefined;
      for await (const _ of stream) {
        const now = performance.now();
        if (last !== undefined) gaps.push(now - last);
        last = now;
      }
    })();

    const words = Array.from({ length: 300_000 }, (_, i) => ["tide", "lamp", "gull", "rope"][i % 4]).join(
      " ",
    );
    const results = await Promise.all([
      status(client.chat.completions.create({ model: DEFAULT_MODEL, messages: say("a".repeat(5_000_000)) })),
      status(client.chat.completions.create({ model: DEFAULT_MODEL, messages: say(words.repeat(2)) })),
      status(
        client.completions.create({
          model: DEFAULT_MODEL,
          prompt: Array.from({ length: 100_000 }, (_, i) => i % 40_000),
          max_tokens: 4,
        }),
      ),
      status(
        client.chat.completions.create({
          model: DEFAULT_MODEL,
          messages: say("hi"),
          max_tokens: 4,
          logit_bias: Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [String(i), 1])),
        }),
      ),
      status(
        client.chat.completions.create({
          model: DEFAULT_MODEL,
          messages: say("hi"),
          max_tokens: 4,
          stop: Array.from({ length: 1000 }, (_, i) => `${i}`.padEnd(1024, "x")),
        }),
      ),
    ]);
    await reading;
    // Too long for the context (three ways), and a bias on ids outside the vocabulary; the stop
    // strings are served.
    expect(results).toEqual([400, 400, 400, 400, 200]);
    expect(gaps.length).toBeGreaterThan(50);
    expect(Math.max(...gaps)).toBeLessThan(GAP_BOUND_MS);
  }, 180_000);
});
