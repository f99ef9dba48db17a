/**
 * End to end, what test/engine/batch-invariance.test.ts checks in the engine: through a real
 * server and the official `openai` client, each request of a mix (chat and completions, streaming
 * or not, n = 2 with a seed, logprobs, a compact JSON schema, stop strings, echo) gets the same
 * response alone as when the whole mix arrives staggered, or all at once (several prompts then
 * prefill in one step). Only what is meant to differ is left out: ids, timestamps and
 * cached_tokens (the prefix cache warms between the passes).
 */
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeSessions } from "../../src/core/runner/native-session.ts";
import {
  type DefaultModelServer,
  haveDefaultModel,
  DEFAULT_MODEL as MODEL,
  startDefaultModelServer,
} from "./server-process.ts";

const KEY = "e2e-batch-invariance-key-0123456789";

const SCHEMA = {
  type: "object",
  properties: { name: { type: "string", maxLength: 16 }, age: { type: "integer" } },
  required: ["name", "age"],
  additionalProperties: false,
};

/** A response as it must be whatever else runs: no ids, timestamps or cache hits; floats to 1e-3. */
function comparable(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, (key, v) => {
      if (["id", "created", "system_fingerprint", "cached_tokens"].includes(key)) return undefined;
      return typeof v === "number" && !Number.isInteger(v) ? Math.round(v * 1000) : v;
    }),
  );
}

// As test/engine/batch-invariance.test.ts: a property of ortserve's own operators.
describe.skipIf(!haveDefaultModel || !nativeSessions?.blockQuantMatMul)(
  "batch invariance through the openai client",
  () => {
    let served: DefaultModelServer;
    let client: OpenAI;

    beforeAll(async () => {
      served = await startDefaultModelServer({ prefix: "ortserve-e2e-invariance-", apiKey: KEY });
      client = served.client;
    });

    afterAll(async () => {
      await served?.close();
    });

    it("each request of a staggered mix gets the response it gets alone", async () => {
      const topics = ["cats", "the sea", "a red bicycle", "Paris", "prime numbers", "tea"];
      const chat = (i: number) => ({
        model: MODEL,
        messages: [{ role: "user" as const, content: `Write about ${topics[i % topics.length]} (${i}).` }],
        max_tokens: 8 + ((i * 7) % 20),
        temperature: 0,
      });
      const requests: (() => Promise<unknown>)[] = [
        async () => client.chat.completions.create(chat(0)),
        async () => client.chat.completions.create({ ...chat(1), n: 2, temperature: 0.9, seed: 11 }),
        async () => client.chat.completions.create({ ...chat(2), logprobs: true, top_logprobs: 2 }),
        async () =>
          client.chat.completions.create({
            ...chat(3),
            max_tokens: 40,
            // vLLM's compact JSON: a short key's two or three forced tokens jump (the minimum once
            // followed the batch's size: this request then read differently alone and in the mix).
            ...({ structured_outputs: { json: SCHEMA, disable_any_whitespace: true } } as object),
          }),
        async () => client.chat.completions.create({ ...chat(4), stop: ["e", "."] }),
        async () => {
          const stream = await client.chat.completions.create({
            ...chat(5),
            stream: true,
            stream_options: { include_usage: true },
          });
          const parts: unknown[] = [];
          for await (const chunk of stream) parts.push(chunk.choices[0]?.delta ?? chunk.usage);
          return parts;
        },
        async () =>
          client.completions.create({
            model: MODEL,
            prompt: "Once upon a time,",
            max_tokens: 12,
            temperature: 0,
          }),
        async () =>
          client.completions.create({
            model: MODEL,
            prompt: "Facts about tea:",
            max_tokens: 6,
            temperature: 0,
            echo: true,
            logprobs: 1,
          }),
        async () => client.chat.completions.create({ ...chat(6), temperature: 1, top_p: 0.9, seed: 5 }),
        async () => client.chat.completions.create(chat(7)),
      ];
      const alone: unknown[] = [];
      for (const send of requests) alone.push(comparable(await send()));
      const together = await Promise.all(
        requests.map(async (send, i) => {
          await new Promise((r) => setTimeout(r, (i * 7) % 25));
          return comparable(await send());
        }),
      );
      for (const [i, response] of together.entries()) expect(response, `request ${i}`).toEqual(alone[i]);
      // All at once: several prompts start in one step (their chunks in one pass), and still each
      // gets its solo response.
      const burst = await Promise.all(requests.map(async (send) => comparable(await send())));
      for (const [i, response] of burst.entries()) expect(response, `burst request ${i}`).toEqual(alone[i]);
      const metrics = await (
        await fetch(`${served.server.url}/metrics`, { headers: { authorization: `Bearer ${KEY}` } })
      ).text();
      const batched = metrics
        .split("\n")
        .filter((l) => l.startsWith("ortserve_engine_prompt_batch_steps_total{"))
        .reduce((n, l) => n + Number(l.split(" ").at(-1)), 0);
      expect(batched).toBeGreaterThan(0);
    });
  },
);
