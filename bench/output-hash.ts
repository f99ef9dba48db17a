/**
 * A fixed prompt set through the in-process Engine, and one SHA-256 of every output (tokens, text,
 * finish reasons, logprobs, prompt logprobs, cached-token counts). Two runs of the same engine
 * code print the same hash; a change to the step that keeps behaviour keeps it too.
 *
 *   node bench/output-hash.ts            # the default path (one ragged pass per step where it can)
 *   ORTSERVE_MIXED_STEPS=0 node bench/output-hash.ts     # decode rows and prompt chunks apart
 *   ORTSERVE_NATIVE_SESSION=0 node bench/output-hash.ts  # onnxruntime-node's session
 *
 * The set covers greedy, seeded sampling, beam search, n > 1, structured output (with
 * jump-forward), logprobs, prompt logprobs, a prompt longer than a prefill chunk, a prefix-cache
 * hit, and requests running concurrently. The hash is printed with each request's digest, so a
 * difference names the request it starts at.
 */
import { createHash } from "node:crypto";
import { Engine, type GenerateRequest } from "../src/engine/engine.ts";

const MODEL = "smollm2-135m-instruct";

const chat = (content: string, params: GenerateRequest["params"]): GenerateRequest => ({
  model: MODEL,
  prompt: { messages: [{ role: "user", content }] },
  params,
});

const LONG =
  "Here is some background. The river starts in the mountains, runs through three valleys and a " +
  "large lake, feeds farms on both banks, turns the wheels of four old mills and reaches the sea " +
  "at a wide delta where birds gather every spring. Summarise it in one sentence.";

const SCHEMA = JSON.stringify({
  type: "object",
  properties: { city: { type: "string" }, population: { type: "integer" } },
  required: ["city", "population"],
  additionalProperties: false,
});

/** Run one after another (the prefix-cache hit needs the first long prompt in the cache). */
const sequential: [string, GenerateRequest][] = [
  ["greedy", chat("What is the capital of France?", { maxTokens: 24, sampling: { temperature: 0 } })],
  [
    "greedy-logprobs",
    chat("Name three colours.", { maxTokens: 16, logprobs: 3, sampling: { temperature: 0 } }),
  ],
  [
    "seeded",
    chat("Tell me a short story.", { maxTokens: 24, sampling: { temperature: 0.8, topP: 0.9, seed: 7n } }),
  ],
  [
    "n3-seeded",
    chat("Give me a fruit.", { maxTokens: 12, n: 3, logprobs: 1, sampling: { temperature: 1, seed: 11n } }),
  ],
  ["beams", chat("Finish: the cat sat", { maxTokens: 10, n: 3, useBeamSearch: true, sampling: {} })],
  ["long-prompt", chat(LONG, { maxTokens: 20, sampling: { temperature: 0 } })],
  ["prefix-hit", chat(LONG, { maxTokens: 20, sampling: { temperature: 0.7, seed: 3n } })],
  [
    "json-schema",
    chat("Give a city and its population as JSON.", {
      maxTokens: 40,
      constraint: { kind: "json_schema", schema: SCHEMA, anyWhitespace: false },
      sampling: { temperature: 0 },
    }),
  ],
  [
    "choice",
    chat("Is the sky blue?", {
      maxTokens: 8,
      constraint: { kind: "choice", choices: ["yes, it is", "no, it is not"] },
      sampling: { temperature: 0.9, seed: 5n },
    }),
  ],
  [
    "beams-regex",
    chat("A number:", {
      maxTokens: 8,
      n: 2,
      useBeamSearch: true,
      constraint: { kind: "regex", pattern: "[0-9]{1,4}" },
      sampling: {},
    }),
  ],
  [
    "stop-string",
    chat("Count from one to ten in words.", { maxTokens: 40, stop: ["five"], sampling: { temperature: 0 } }),
  ],
];

/** Submitted together: they join and leave the batch at different steps. */
const concurrent: [string, GenerateRequest][] = [
  ["c-greedy", chat("Why is the sea salty?", { maxTokens: 30, sampling: { temperature: 0 } })],
  ["c-long", chat(`${LONG} Then list two of the places.`, { maxTokens: 14, sampling: { temperature: 0 } })],
  ["c-n2", chat("Pick an animal.", { maxTokens: 10, n: 2, sampling: { temperature: 1.1, seed: 21n } })],
  ["c-beams", chat("The best season is", { maxTokens: 9, n: 2, useBeamSearch: true, sampling: {} })],
  [
    "c-json",
    chat("Give a city and its population as JSON.", {
      maxTokens: 40,
      constraint: { kind: "json_schema", schema: SCHEMA, anyWhitespace: true },
      sampling: { temperature: 0.6, seed: 9n },
    }),
  ],
  ["c-short", chat("Hi", { maxTokens: 3, sampling: { temperature: 0 } })],
  [
    "c-prompt-logprobs",
    chat("Say hello.", { maxTokens: 6, promptLogprobs: 2, sampling: { temperature: 0 } }),
  ],
];

/** JSON with every object's keys sorted: the hash follows the values, not the order fields are set in. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
const digest = (value: unknown) => createHash("sha256").update(canonical(value)).digest("hex");

// A small chunk so the long prompts take several steps, and prefill beside decoding rows.
const engine = await Engine.open({ workers: 1, threads: 2, prefillChunk: 16, maxNumSeqs: 8 });
const outputs: [string, unknown][] = [];
try {
  for (const [name, req] of sequential) outputs.push([name, await engine.generate(req)]);
  const results = await Promise.all(concurrent.map(([, req]) => engine.generate(req)));
  concurrent.forEach(([name], i) => {
    outputs.push([name, results[i]]);
  });
  const score = await engine.score({ model: MODEL, prompt: { text: LONG }, topLogprobs: 2 });
  outputs.push(["score", score.promptLogprobs]);
} finally {
  await engine.close();
}
const all = createHash("sha256");
for (const [name, result] of outputs) {
  const { requestId: _, ...rest } = result as { requestId?: string };
  const d = digest(rest);
  all.update(d);
  console.log(`${d.slice(0, 16)}  ${name}`);
}
const hit = outputs.find(([name]) => name === "prefix-hit")![1] as { cachedTokens: number };
console.log(`prefix-hit cachedTokens ${hit.cachedTokens}`);
console.log(`outputs ${all.digest("hex")}`);
