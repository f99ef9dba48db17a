/**
 * A client that goes away at any stage — queued, prefilling, decoding, or not reading a stream it
 * asked for — frees its sequence: /metrics shows the queue, running sequences and live KV bytes
 * back at zero long before the abandoned generation would have ended, and the engine's own count
 * says each was freed at the first step boundary after its abort arrived (no step begun for it
 * after that). Real model, real HTTP.
 */
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineGauges } from "../../bench/server-probe.ts";
import { DEFAULT_MODEL, type Harness, startDefaultModelHarness } from "./harness.ts";

const MODEL = DEFAULT_MODEL;
let h: Harness;

beforeAll(async () => {
  h = await startDefaultModelHarness({
    // One row: a second request waits in the queue. Small prefill chunks: a long prompt takes steps.
    maxNumSeqs: 1,
    prefillChunk: 32,
    threads: 2,
  });
});
afterAll(() => h?.dispose());

interface EngineGauges {
  queued: number;
  running: number;
  kvUsed: number;
  abortsFreed: number;
  abortFreeStepsMax: number;
}

async function gauges(): Promise<EngineGauges> {
  const g = await engineGauges(h.url);
  return {
    queued: g.queued,
    running: g.running,
    kvUsed: g.kvUsedBytes,
    abortsFreed: g.abortsFreed,
    abortFreeStepsMax: g.abortFreeStepsMax,
  };
}

/** Polls /metrics until `ok` holds (each poll is one engine stats round trip). */
async function until(ok: (g: EngineGauges) => boolean, what: string): Promise<EngineGauges> {
  for (let i = 0; i < 2000; i++) {
    const g = await gauges();
    if (ok(g)) return g;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`metrics never showed ${what}: ${JSON.stringify(await gauges())}`);
}

const idle = (g: EngineGauges) => g.queued === 0 && g.running === 0 && g.kvUsed === 0;

/** A generation far longer than any test waits for. */
function longChat(prompt: string, stream: boolean, maxTokens = 3000): string {
  return JSON.stringify({
    model: MODEL,
    messages: [{ role: "user", content: prompt }],
    max_tokens: maxTokens,
    ignore_eos: true,
    stream,
    cache_salt: `${Math.random()}`,
  });
}

/** Sends a chat request; `gone()` destroys the connection. `chunks` counts the SSE bytes read. */
function open(body: string, opts: { read: boolean } = { read: true }) {
  const url = new URL("/v1/chat/completions", h.url);
  const state = { bytes: 0, ended: false };
  const req = httpRequest(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${h.key}` },
  });
  req.on("error", () => {});
  req.on("response", (res) => {
    res.on("error", () => {});
    if (!opts.read) res.pause();
    res.on("data", (d: Buffer) => {
      state.bytes += d.length;
    });
    res.on("end", () => {
      state.ended = true;
    });
  });
  req.end(body);
  return { state, gone: () => req.destroy() };
}

describe("a client that disconnects", () => {
  it("while decoding (streaming and not): its sequence and KV are freed", async () => {
    await until(idle, "an idle engine");
    for (const stream of [true, false]) {
      const c = open(longChat("Tell me a long story.", stream));
      await until((g) => g.running === 1 && g.kvUsed > 0, "a running sequence");
      if (stream) await until(() => c.state.bytes > 0, "streamed bytes");
      c.gone();
      await until(idle, "the sequence freed");
      expect(c.state.ended).toBe(false);
    }
  });

  it("while queued behind another request: it leaves the queue, the other keeps running", async () => {
    const first = open(longChat("Count slowly to a thousand.", true));
    await until((g) => g.running === 1, "the first request running");
    const queued = open(longChat("Name every country.", false));
    await until((g) => g.queued === 1, "the second request queued");
    queued.gone();
    const g = await until((g) => g.queued === 0, "the queue emptied");
    expect(g.running).toBe(1);
    first.gone();
    await until(idle, "everything freed");
  });

  it("while its long prompt is being prefilled", async () => {
    // About 3,000 prompt tokens: close to a hundred prefill steps of 32.
    const prompt = "The quick brown fox jumps over the lazy dog. ".repeat(300);
    const c = open(longChat(prompt, true, 500));
    await until((g) => g.running === 1, "the prompt being prefilled");
    expect(c.state.bytes).toBe(0);
    c.gone();
    await until(idle, "the prefill abandoned");
  });

  it("while not reading the stream it asked for", async () => {
    const c = open(longChat("Write the alphabet a hundred times.", true), { read: false });
    await until((g) => g.running === 1 && g.kvUsed > 0, "a running sequence");
    // Let the server's writes pile up unread for a while, then go.
    await new Promise((r) => setTimeout(r, 500));
    c.gone();
    await until(idle, "the sequence freed");
  });

  it("each was freed at the first engine step boundary after its abort reached the engine", async () => {
    // Six requests went away above: two decoding, one queued and the one ahead of it, one
    // prefilling, one not reading.
    const g = await until(idle, "an idle engine");
    expect(g.abortsFreed).toBeGreaterThanOrEqual(6);
    expect(g.abortFreeStepsMax).toBe(0);
  });
});
