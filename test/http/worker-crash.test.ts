import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineGauges } from "../../bench/server-probe.ts";
import {
  bearer,
  chat,
  DEFAULT_MODEL,
  expectApiError,
  get,
  type Harness,
  parseSse,
  startDefaultModelHarness,
} from "./harness.ts";

const MODEL = DEFAULT_MODEL;
let h: Harness;

beforeAll(async () => {
  h = await startDefaultModelHarness({ maxNumSeqs: 4, threads: 1 });
});
afterAll(() => h?.dispose());

/** A generation far longer than the test waits for. */
function longChat(stream: boolean): Record<string, unknown> {
  return {
    model: MODEL,
    messages: [{ role: "user", content: "Tell me a long story." }],
    max_tokens: 3000,
    ignore_eos: true,
    stream,
  };
}

describe("an engine worker killed mid-request", () => {
  it("fails only its requests, cleanly, and the server serves again within 5 s", async () => {
    const warm = await chat(h, { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 2 });
    expect(warm.status, warm.text).toBe(200);

    // The stream first, and under way (its status and first event sent) before the crash: a
    // request still mid-prefill when its worker dies has sent nothing and fails with a 500.
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...bearer(h) },
      body: JSON.stringify(longChat(true)),
    });
    const streamed = res.text().then((text) => ({ status: res.status, text }));
    const plain = chat(h, longChat(false));
    while ((await engineGauges(h.url)).running < 2) await new Promise((r) => setTimeout(r, 20));

    const crashedAt = performance.now();
    await h.server.engine.pool.crashOneWorker().catch(() => undefined);

    // The non-streaming request had sent nothing yet: an OpenAI error body.
    expectApiError(await plain, 500, { type: "server_error", message: /engine worker/ });
    // The stream had started: its last event is an error, and it still ends the stream cleanly.
    const s = await streamed;
    expect(s.status).toBe(200);
    const { events } = parseSse(s.text);
    expect(events.length).toBeGreaterThan(1);
    const last = events.at(-1) as { error?: { type: string; message: string } };
    expect(last.error?.type).toBe("server_error");
    expect(last.error?.message).toMatch(/engine worker/);

    // A new request succeeds, well within 5 s of the crash (its worker restarts and reloads the model).
    const after = await chat(h, { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 3 });
    expect(after.status, after.text).toBe(200);
    expect(performance.now() - crashedAt).toBeLessThan(5000);
    expect((await get(h, "/health", {})).status).toBe(200);
  });
});
