/**
 * How closely a converted model follows llama.cpp on its source GGUF, cheaply enough for large
 * vocabularies: llama.cpp decodes each chat prompt greedily (its own sampler, so no full logit rows
 * cross into JavaScript), then ortserve scores prompt + that continuation in one pass. Top-1
 * agreement is the share of continuation positions where ortserve's argmax is llama.cpp's token;
 * the identical prefix is how long ortserve's own greedy run follows llama.cpp's.
 *
 *   node bench/greedy-agreement.ts --model-dir <dir> --gguf <file> [--format q4|fp32] [--tokens 32] [--threads 2]
 *
 * `node test/fidelity/run.ts --model-dir … --gguf …` is the full comparison (decisive positions,
 * tokenizer parity); this is the quick look.
 */
import { parseArgs } from "node:util";
import { readModelConfig } from "../src/core/model/model-config.ts";
import type { ModelFormat } from "../src/core/model/model-files.ts";
import { openOrtCandidate } from "../test/fidelity/ort-candidate.ts";
import { chatPrompt } from "../test/fidelity/prompts.ts";
import { openLlamaEngine } from "./llama-engine.ts";

const { values } = parseArgs({
  options: {
    "model-dir": { type: "string" },
    gguf: { type: "string" },
    format: { type: "string", default: "q4" },
    tokens: { type: "string", default: "32" },
    threads: { type: "string", default: "2" },
  },
});
const modelDir = values["model-dir"];
const gguf = values.gguf;
if (!modelDir || !gguf) throw new Error("--model-dir and --gguf are required");
const tokens = Number(values.tokens);
const threads = Number(values.threads);
const format = values.format as ModelFormat;

const SYSTEM = "You are a helpful assistant.";
const QUESTIONS = [
  "Write a Python function that checks whether a number is prime.",
  "What is the capital of France? Answer in one sentence.",
  "Explain what a hash map is to a beginner.",
  "Write a SQL query that returns the ten most recent orders.",
];

const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const vocab = await llama.loadModel({ modelPath: gguf, gpuLayers: 0, vocabOnly: true });
const eos = new Set(readModelConfig(modelDir).decoder.eosTokenIds);
const reference = await openLlamaEngine(gguf, threads, 1024);
const runs: { prompt: number[]; theirs: number[] }[] = [];
for (const q of QUESTIONS) {
  const prompt = [...vocab.tokenize(chatPrompt([q], SYSTEM), true)].map(Number);
  const { ids } = await reference.decode(prompt, tokens - 1);
  const stop = ids.findIndex((t) => eos.has(t));
  runs.push({ prompt, theirs: stop < 0 ? ids : ids.slice(0, stop + 1) });
}
await reference.close();

const ortserve = await openOrtCandidate(modelDir, format, threads);
const perPrompt = [];
let agree = 0;
let scored = 0;
for (const { prompt, theirs } of runs) {
  const rows = await ortserve.teacherForced([...prompt, ...theirs]);
  const v = ortserve.vocabSize;
  let hits = 0;
  theirs.forEach((token, i) => {
    const row = rows.subarray((prompt.length - 1 + i) * v, (prompt.length + i) * v);
    let best = 0;
    for (let j = 1; j < v; j++) if (row[j]! > row[best]!) best = j;
    if (best === token) hits++;
  });
  const ours = await ortserve.greedy!(prompt, theirs.length);
  let prefix = 0;
  while (prefix < theirs.length && ours[prefix] === theirs[prefix]) prefix++;
  agree += hits;
  scored += theirs.length;
  perPrompt.push({
    promptTokens: prompt.length,
    continuation: theirs.length,
    top1Agreement: hits / theirs.length,
    identicalGreedyPrefix: prefix,
    llamaCpp: vocab.detokenize(theirs as never),
    ortserve: vocab.detokenize(ours as never),
  });
}
await ortserve.release();
process.stdout.write(
  `${JSON.stringify({ modelDir, gguf, format, threads, top1Agreement: agree / scored, positions: scored, perPrompt }, null, 2)}\n`,
);
process.exit(0);
