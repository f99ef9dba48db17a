/**
 * Jump-forward's effect on structured outputs: the same requests for JSON records (fixed keys,
 * compact JSON, so the keys and separators are forced) through two in-process Engines, one with
 * jump-forward and one without (`--no-jump-forward`'s setting), at 1 and 16 concurrent streams.
 * Reports completion tokens per second (forced tokens count: they are in the output), the share
 * of output tokens that were forced, output tokens per engine step, and the requests' mean
 * latency. Greedy, yet the two engines' outputs differ: a forced text's tokens are the tokenizer's,
 * not necessarily the model's choice, and the model continues from them. Tokens per step shows the
 * mechanism apart from that; tokens per second also carries the outputs' difference.
 *
 *   node bench/jump-forward.ts [--runs 3] [--threads 2]
 */
import { Engine } from "../src/engine/engine.ts";
import { median } from "./stats.ts";

const MODEL = "smollm2-135m-instruct";
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const runs = arg("--runs", 3);
const threads = arg("--threads", 2);

const SCHEMA = JSON.stringify({
  type: "object",
  properties: {
    name: { type: "string", maxLength: 24 },
    age: { type: "integer", minimum: 0 },
    email: { type: "string", format: "email" },
    city: { type: "string", maxLength: 24 },
    country: { type: "string", maxLength: 24 },
    occupation: { type: "string", maxLength: 24 },
    married: { type: "boolean" },
  },
  required: ["name", "age", "email", "city", "country", "occupation", "married"],
  additionalProperties: false,
});

interface Measured {
  tokensPerSecond: number;
  meanLatency: number;
  tokens: number;
  jumped: number;
  steps: number;
}

async function counters(engine: Engine): Promise<{ jumped: number; steps: number }> {
  const stats = Object.values(await engine.stats()) as { jumpForwardTokens?: number; steps?: number }[];
  return {
    jumped: stats.reduce((s, e) => s + (e.jumpForwardTokens ?? 0), 0),
    steps: stats.reduce((s, e) => s + (e.steps ?? 0), 0),
  };
}

async function measure(engine: Engine, streams: number): Promise<Measured> {
  const before = await counters(engine);
  const t0 = performance.now();
  const latencies: number[] = [];
  const outs = await Promise.all(
    Array.from({ length: streams }, async (_, i) => {
      const out = await engine.generate({
        model: MODEL,
        prompt: { messages: [{ role: "user", content: `Invent person number ${i} as a JSON record.` }] },
        params: {
          maxTokens: 160,
          cacheSalt: `jump-${Math.random()}`,
          sampling: { temperature: 0 },
          constraint: { kind: "json_schema", schema: SCHEMA, anyWhitespace: false },
        },
      });
      latencies.push((performance.now() - t0) / 1000);
      return out;
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const tokens = outs.reduce((n, o) => n + o.choices[0]!.tokenIds.length, 0);
  return {
    tokensPerSecond: tokens / seconds,
    meanLatency: latencies.reduce((a, b) => a + b, 0) / latencies.length,
    tokens,
    ...(await counters(engine).then((c) => ({
      jumped: c.jumped - before.jumped,
      steps: c.steps - before.steps,
    }))),
  };
}

const lines: string[] = [];
const results: Record<string, Record<number, Measured[]>> = { on: {}, off: {} };
for (const jump of [true, false]) {
  const engine = await Engine.open({ workers: 1, threads, maxNumSeqs: 16, jumpForward: jump });
  await measure(engine, 1); // warm-up: session, grammar compile, kernels
  for (const streams of [1, 16]) {
    const all: Measured[] = [];
    for (let r = 0; r < runs; r++) all.push(await measure(engine, streams));
    results[jump ? "on" : "off"]![streams] = all;
  }
  await engine.close();
}
for (const streams of [1, 16]) {
  const on = results.on![streams]!;
  const off = results.off![streams]!;
  const rate = (xs: Measured[]) => median(xs.map((x) => x.tokensPerSecond));
  const latency = (xs: Measured[]) => median(xs.map((x) => x.meanLatency));
  const forced = on.reduce((s, x) => s + x.jumped, 0) / on.reduce((s, x) => s + x.tokens, 0);
  const perStep = (xs: Measured[]) =>
    xs.reduce((s, x) => s + x.tokens, 0) / xs.reduce((s, x) => s + x.steps, 0);
  lines.push(
    `${streams} stream(s): jump-forward ${rate(on).toFixed(1)} tok/s (${(forced * 100).toFixed(0)}% of tokens forced), ` +
      `without ${rate(off).toFixed(1)} tok/s: ${(rate(on) / rate(off)).toFixed(2)}x; ` +
      `output tokens per engine step ${perStep(on).toFixed(2)} vs ${perStep(off).toFixed(2)}; ` +
      `mean latency ${latency(on).toFixed(2)} s vs ${latency(off).toFixed(2)} s ` +
      `(runs: ${on.map((x) => x.tokensPerSecond.toFixed(1)).join(", ")} / ${off.map((x) => x.tokensPerSecond.toFixed(1)).join(", ")})`,
  );
}
console.log(lines.join("\n"));
