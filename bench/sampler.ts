/**
 * Sampler cost per token on random logits of a 49,152-token vocabulary, to
 * weigh against a ~8-10 ms decode step and decide whether a native kernel pays.
 *
 *   node bench/sampler.ts [--vocab 49152] [--iterations 2000] [--spread 3] [--json]
 *
 * Reports the median and the best batch (the latter is the cost on an idle core).
 * `--spread` is the standard deviation of the random logits: ~3 gives a
 * peaked, model-like distribution; 1 a flat one where top_p keeps most of the
 * vocabulary (the slow case for top_p).
 */
import { parseArgs } from "node:util";
import type { SamplingParams } from "../src/core/sample/params.ts";
import { SequenceSampler } from "../src/core/sample/sampler.ts";
import { median } from "./stats.ts";

const { values: args } = parseArgs({
  options: {
    vocab: { type: "string", default: "49152" },
    iterations: { type: "string", default: "2000" },
    spread: { type: "string", default: "3" },
    json: { type: "boolean", default: false },
  },
});
const vocab = Number(args.vocab);
const iterations = Number(args.iterations);
const spread = Number(args.spread);

const base: SamplingParams = {
  temperature: 1,
  topP: 1,
  topK: 0,
  minP: 0,
  repetitionPenalty: 1,
  frequencyPenalty: 0,
  presencePenalty: 0,
  minTokens: 0,
  stopTokenIds: [],
  eosTokenIds: [2],
  ignoreEos: false,
  seed: 1234,
};

const configs: { name: string; params: SamplingParams }[] = [
  { name: "greedy", params: { ...base, temperature: 0 } },
  { name: "temperature 0.7", params: { ...base, temperature: 0.7 } },
  { name: "top_k=50", params: { ...base, temperature: 0.7, topK: 50 } },
  { name: "top_p=0.9", params: { ...base, temperature: 0.7, topP: 0.9 } },
  { name: "min_p=0.05", params: { ...base, temperature: 0.7, minP: 0.05 } },
  {
    name: "top_p+top_k+min_p+penalties+logprobs=20",
    params: {
      ...base,
      temperature: 0.7,
      topP: 0.9,
      topK: 50,
      minP: 0.05,
      repetitionPenalty: 1.1,
      frequencyPenalty: 0.5,
      presencePenalty: 0.5,
      logprobs: 20,
    },
  },
  { name: "greedy+logprobs=20", params: { ...base, temperature: 0, logprobs: 20 } },
];

// Box-Muller normal logits; a fixed pool of rows so every config sees the same data.
function randomRows(count: number): Float32Array[] {
  let state = 0x2545f491;
  const uniform = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return (state + 0.5) / 4294967296;
  };
  return Array.from({ length: count }, () => {
    const row = new Float32Array(vocab);
    for (let i = 0; i < vocab; i++)
      row[i] = spread * Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
    return row;
  });
}

const rows = randomRows(16);
const prompt = Array.from({ length: 512 }, (_, i) => (i * 7919) % vocab);
const output = Array.from({ length: 256 }, (_, i) => (i * 104729) % vocab);

// Configs take turns batch by batch so that load from other processes spreads evenly over them.
const samplers = configs.map(({ params }) => new SequenceSampler(params, vocab, prompt));
for (const sampler of samplers) for (let i = 0; i < 200; i++) sampler.sample(rows[i % rows.length], output);
const batch = 50;
const timings = configs.map(() => [] as number[]);
for (let done = 0; done < iterations; done += batch) {
  samplers.forEach((sampler, c) => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < batch; i++) sampler.sample(rows[(done + i) % rows.length], output);
    timings[c].push(Number(process.hrtime.bigint() - start) / 1e3 / batch);
  });
}
const results = configs.map(({ name }, c) => ({
  config: name,
  medianMicros: median(timings[c]),
  minMicros: Math.min(...timings[c]),
}));

if (args.json) console.log(JSON.stringify({ vocab, spread, iterations, results }, null, 2));
else {
  console.log(`vocab ${vocab}, logits ~ N(0, ${spread}^2), ${iterations} samples per config, µs per sample`);
  console.log(`${"config".padEnd(42)} ${"median".padStart(8)} ${"best".padStart(8)}`);
  for (const r of results) {
    console.log(
      `${r.config.padEnd(42)} ${r.medianMicros.toFixed(1).padStart(8)} ${r.minMicros.toFixed(1).padStart(8)}`,
    );
  }
}
