/**
 * One server, several models: two models pulled into one models directory are both listed by
 * GET /v1/models and each request runs the model it names (their weights differ, and so do the
 * logprobs they give the same prompt).
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConverter } from "../../src/models/convert/run-conversion.ts";
import { pull } from "../../src/models/pull/pull.ts";
import { writeSyntheticGguf } from "../fixtures/synthetic-model.ts";
import { chat, get, type Harness, startHarness } from "./harness.ts";

let h: Harness;

beforeAll(async () => {
  const converter = await loadConverter();
  h = await startHarness(
    async (modelsDir, root) => {
      for (const [name, seed] of [
        ["alpha", 1],
        ["beta", 7],
      ] as const) {
        const gguf = writeSyntheticGguf(join(root, `${name}.gguf`), seed);
        await pull({
          source: gguf,
          name,
          format: "fp32",
          modelsDir,
          cacheDir: join(root, "cache"),
          converter,
          log: () => {},
          progressStream: { write: () => true },
        });
      }
    },
    { checkModelFiles: true },
  );
});
afterAll(() => h?.dispose());

interface ChatReply {
  model: string;
  choices: { logprobs: { content: { logprob: number }[] } }[];
}

describe("several models from one server", () => {
  it("lists both pulled models", async () => {
    const r = await get<{ data: { id: string; owned_by: string }[] }>(h, "/v1/models");
    expect(r.status).toBe(200);
    expect(r.json.data.map((m) => m.id).sort()).toEqual(["alpha", "beta"]);
  });

  it("runs each request on the model it names", async () => {
    const ask = (model: string) =>
      chat<ChatReply>(h, {
        model,
        messages: [{ role: "user", content: "the art" }],
        max_tokens: 2,
        temperature: 0,
        logprobs: true,
      });
    const [a, b] = await Promise.all([ask("alpha"), ask("beta")]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect([a.json.model, b.json.model]).toEqual(["alpha", "beta"]);
    const first = (r: typeof a) => r.json.choices[0]!.logprobs.content[0]!.logprob;
    expect(first(a)).not.toBe(first(b));
    // The same model asked again gives the same answer: the difference is the weights, not noise.
    expect(first(await ask("alpha"))).toBe(first(a));
  });
});
