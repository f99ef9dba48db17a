/**
 * POST /v1/completions over raw HTTP on the synthetic model: a failing prompt of a batch fails the
 * request (and stops the others) with the engine's 400, usage rows for answered and refused
 * requests, and the server serving on afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addSyntheticModel,
  bearer,
  CONTEXT,
  expectApiError,
  type Harness,
  reply,
  startHarness,
} from "./harness.ts";

let h: Harness;

beforeAll(async () => {
  h = await startHarness(async (models) => {
    await addSyntheticModel(models, "tiny");
  });
});

afterAll(async () => {
  await h?.dispose();
});

function complete(body: unknown, requestId: string) {
  return fetch(`${h.url}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Request-Id": requestId, ...bearer(h) },
    body: JSON.stringify(body),
  }).then((r) => reply<{ choices: { index: number; text: string }[]; usage: { prompt_tokens: number } }>(r));
}

function usageRow(requestId: string) {
  return h.server.storage.db
    .prepare("SELECT model, prompt_tokens, completion_tokens, status FROM usage WHERE request_id = ?")
    .get(requestId) as Record<string, unknown> | undefined;
}

describe("POST /v1/completions (synthetic model)", () => {
  it("answers a batch of token-id prompts and records one usage row for it", async () => {
    const r = await complete(
      {
        model: "tiny",
        prompt: [
          [5, 6],
          [7, 8, 9],
        ],
        max_tokens: 3,
        temperature: 0,
      },
      "cmpl-ok",
    );
    expect(r.status, r.text).toBe(200);
    expect(r.json.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(r.json.usage.prompt_tokens).toBe(5);
    expect(usageRow("cmpl-ok")).toEqual({
      model: "tiny",
      prompt_tokens: 5,
      completion_tokens: 6,
      status: 200,
    });
  });

  it("fails the whole request when one prompt cannot be served, then serves the next", async () => {
    const long = Array.from({ length: CONTEXT + 10 }, (_, i) => 5 + (i % 50));
    const r = await complete({ model: "tiny", prompt: [[5, 6], long], max_tokens: 3 }, "cmpl-too-long");
    expectApiError(r, 400, { param: "max_tokens", message: /maximum context length/ });
    expect(usageRow("cmpl-too-long")).toMatchObject({ model: "tiny", status: 400 });
    const bad = await complete({ model: "tiny", prompt: [1, 99999] }, "cmpl-oov");
    expectApiError(bad, 400, { param: "prompt" });
    expect(usageRow("cmpl-oov")).toMatchObject({ status: 400 });
    const after = await complete({ model: "tiny", prompt: "hello", max_tokens: 2 }, "cmpl-after");
    expect(after.status, after.text).toBe(200);
  });
});
