/**
 * Sampler cost per token on random logits of a 49,152-token vocabulary, with
 * the TypeScript kernels and with the native ones (native/) side by side in
 * one run, weighed against a decode step: the share of a step that sampling
 * every sequence of a batch costs, at batch 1 and 8.
 *
 *   node bench/sampler.ts [--vocab 49152] [--iterations 2000] [--spread 3] [--json]
 *                         [--step-ms 9,40] [--measure-steps] [--model smollm2-135m-instruct]
 *                         [--native-scalar]
 *
 * Reports the median and the best batch of 50 samples (the latter is the cost
 * on an idle core). `--spread` is the standard deviation of the random logits:
 * ~3 gives a peaked, model-like distribution; 1 a flat one where top_p keeps
 * most of the vocabulary (the slow case for top_p). `--step-ms` gives the
 * decode step times at batch 1 and 8; `--measure-steps` times them on the
 * model instead (q4, 128-token contexts). `--native-scalar` runs the addon's
 * portable code instead of its AVX2 kernels. Without the addon built, only
 * the TypeScript column is filled.
 */
import { parseArgs } from "node:util";
import { readModelConfig } from "../src/core/model/model-config.ts";
import { BatchRunner } from "../src/core/runner/batch-runner.ts";
import { KvSlots } from "../src/core/runner/kv-slots.ts";
import { createDecoderSession } from "../src/core/runner/ort-session.ts";
import { addon, useNative } from "../src/core/sample/native.ts";
import { NEUTRAL_SAMPLING, type SamplingParams } from "../src/core/sample/params.ts";
import { SequenceSampler } from "../src/core/sample/sampler.ts";
import { warmUp } from "../src/core/sample/warm-up.ts";
import { modelsDir } from "../src/util/paths.ts";
import { median } from "./stats.ts";

const { values: args } = parseArgs({
  options: {
    vocab: { type: "string", default: "49152" },
    iterations: { type: "string", default: "2000" },
    spread: { type: "string", default: "3" },
    json: { type: "boolean", default: false },
    "step-ms": { type: "string", default: "9,40" },
    "measure-steps": { type: "boolean", default: false },
    model: { type: "string", default: "smollm2-135m-instruct" },
    "native-scalar": { type: "boolean", default: false },
  },
});
const vocab = Number(args.vocab);
const iterations = Number(args.iterations);
const spread = Number(args.spread);
const BATCHES = [1, 8] as const;

const base: SamplingParams = { ...NEUTRAL_SAMPLING, eosTokenIds: [2], seed: 1234 };

const configs: { name: string; params: SamplingParams }[] = [
  { name: "greedy", params: { ...base, temperature: 0 } },
  { name: "temperature 0.7", params: { ...base, temperature: 0.7 } },
  { name: "top_k=50", params: { ...base, temperature: 0.7, topK: 50 } },
  { name: "top_k=1000", params: { ...base, temperature: 0.7, topK: 1000 } },
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

/** Median decode step (ms) at each batch size on the model, every row holding a 128-token context. */
async function measureSteps(): Promise<number[]> {
  const dir = `${modelsDir()}/${args.model}`;
  const model = readModelConfig(dir).decoder;
  const { session } = await createDecoderSession(dir, "q4");
  try {
    const kv = new KvSlots(
      { layers: model.numLayers, kvHeads: model.numKvHeads, headDim: model.headDim },
      { maxRows: 8, maxPositions: 512 },
    );
    const runner = new BatchRunner(session, kv);
    const context = Array.from({ length: 128 }, (_, i) => 1 + ((i * 7919) % 1000));
    const out: number[] = [];
    for (const rows of BATCHES) {
      for (let r = 0; r < rows; r++) await runner.prefill(r, context, 0);
      const times: number[] = [];
      for (let step = 0; step < 40; step++) {
        const start = performance.now();
        // Every row stays at the same length: each step overwrites the same position.
        await runner.decode(new Array(rows).fill(42), new Array(rows).fill(context.length));
        if (step >= 5) times.push(performance.now() - start);
      }
      out.push(median(times));
    }
    return out;
  } finally {
    await session.release();
  }
}

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

const stepMs = args["measure-steps"] ? await measureSteps() : args["step-ms"].split(",").map(Number);
if (stepMs.length !== BATCHES.length || !stepMs.every((ms) => ms > 0))
  throw new Error("--step-ms: two positive step times (batch 1, batch 8) expected");

const simd = addon?.setSimd(!args["native-scalar"]) ?? false;
const rows = randomRows(16);
const prompt = Array.from({ length: 512 }, (_, i) => (i * 7919) % vocab);
const output = Array.from({ length: 256 }, (_, i) => (i * 104729) % vocab);

// The sampler module warmed its paths up on whichever kernels were active when
// it loaded; give the TypeScript ones the same before their first full-size call.
const modes = addon ? [false, true] : [false];
useNative(false);
warmUp(SequenceSampler);

// Each config and kernel set takes turns batch by batch, so that load from other processes spreads evenly.
const runs = configs.flatMap((config, c) =>
  modes.map((native) => ({ c, native, sampler: new SequenceSampler(config.params, vocab, prompt) })),
);
for (const run of runs) {
  useNative(run.native);
  for (let i = 0; i < 200; i++) run.sampler.sample(rows[i % rows.length], output);
}
const batch = 50;
const timings = runs.map(() => [] as number[]);
for (let done = 0; done < iterations; done += batch) {
  runs.forEach((run, r) => {
    useNative(run.native);
    const start = process.hrtime.bigint();
    for (let i = 0; i < batch; i++) run.sampler.sample(rows[(done + i) % rows.length], output);
    timings[r].push(Number(process.hrtime.bigint() - start) / 1e3 / batch);
  });
}
useNative(true);

const stats = (c: number, native: boolean) => {
  const r = runs.findIndex((run) => run.c === c && run.native === native);
  if (r < 0) return undefined;
  const medianMicros = median(timings[r]);
  return {
    medianMicros,
    minMicros: Math.min(...timings[r]),
    // Sampling every sequence of the batch, against one decode step.
    stepShare: BATCHES.map((b, i) => (b * medianMicros) / (stepMs[i] * 1e3)),
  };
};
const results = configs.map(({ name }, c) => ({
  config: name,
  js: stats(c, false)!,
  native: stats(c, true),
}));

if (args.json) {
  console.log(
    JSON.stringify({ vocab, spread, iterations, nativeBuilt: !!addon, simd, stepMs, results }, null, 2),
  );
} else {
  const pct = (x: number | undefined) => (x === undefined ? "-" : `${(100 * x).toFixed(1)}%`);
  const us = (x: number | undefined) => (x === undefined ? "-" : x.toFixed(1));
  console.log(
    `vocab ${vocab}, logits ~ N(0, ${spread}^2), ${iterations} samples per config and kernel set, µs per sample`,
  );
  console.log(
    `native kernels: ${addon ? `built, ${simd ? "AVX2" : "scalar"}` : "not built"}; ` +
      `decode step ${stepMs.map((ms, i) => `${ms.toFixed(1)} ms at batch ${BATCHES[i]}`).join(", ")}` +
      `${args["measure-steps"] ? " (measured)" : ""}`,
  );
  const head = [
    "config".padEnd(40),
    "JS med",
    "JS best",
    "nat med",
    "nat best",
    "speedup",
    ...BATCHES.flatMap((b) => [`JS@${b}`, `nat@${b}`]),
  ];
  console.log(head.map((h, i) => (i === 0 ? h : h.padStart(8))).join(" "));
  for (const r of results) {
    const cells = [
      us(r.js.medianMicros),
      us(r.js.minMicros),
      us(r.native?.medianMicros),
      us(r.native?.minMicros),
      r.native ? `${(r.js.medianMicros / r.native.medianMicros).toFixed(1)}x` : "-",
      ...BATCHES.flatMap((_, i) => [pct(r.js.stepShare[i]), pct(r.native?.stepShare[i])]),
    ];
    console.log([r.config.padEnd(40), ...cells.map((c) => c.padStart(8))].join(" "));
  }
  console.log("JS@b / nat@b: sampling b sequences as a share of one decode step at batch b");
}
