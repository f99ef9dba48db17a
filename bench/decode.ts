/**
 * Single-stream prefill and greedy decode throughput: ortserve's engine (the one the server runs)
 * on the q4 and fp32 ONNX models versus llama.cpp on the source GGUF, same prompt ids,
 * same number of generated tokens (EOS ignored), one engine loaded at a time.
 *
 *   node bench/decode.ts [--json] [--engines ort-q4,ort-fp32,llama.cpp] [--threads 1,2]
 *                        [--prompt-tokens 128] [--new-tokens 128] [--runs 3]
 *                        [--max-foreign-cpus 0.15] [--max-attempts 8]
 *                        [--model smollm2-135m-instruct] [--models-dir DIR] [--gguf FILE]
 *                        [--roofline]
 *
 * `--roofline` probes the read bandwidth right before each timed decode and reports the share of
 * the roofline (bench/roofline.ts): ortserve's packed matmul weights, llama.cpp's GGUF matmul
 * tensors, plus the float16 KV cache of the mean context.
 */
import { existsSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { readModelConfig } from "../src/core/model/model-config.ts";
import { type ModelFormat, weightPath } from "../src/core/model/model-files.ts";
import { openGguf } from "../src/models/gguf/reader.ts";
import { sourceGguf } from "../src/models/source-gguf.ts";
import { ggufCacheDir, modelsDir } from "../src/util/paths.ts";
import { readBandwidth } from "./bandwidth.ts";
import { runUndisturbed } from "./contention.ts";
import { vectorInstructionSets } from "./cpu-flags.ts";
import type { BenchEngine } from "./engine.ts";
import { openLlamaEngine } from "./llama-engine.ts";
import { openOrtEngine } from "./ort-engine.ts";
import { benchPrompt } from "./prompt.ts";
import { type EngineResult, markdownTable } from "./report.ts";
import { bytesPerToken, type DecodeReads, meanDecodeContext, rooflineShare } from "./roofline.ts";
import { agreeingPrefix, median, nowSeconds } from "./stats.ts";

const ENGINES = ["ort-q4", "ort-fp32", "llama.cpp"] as const;
type EngineName = (typeof ENGINES)[number];

const { values: args } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    engines: { type: "string", default: ENGINES.join(",") },
    threads: { type: "string", default: "1,2" },
    "prompt-tokens": { type: "string", default: "128" },
    "new-tokens": { type: "string", default: "128" },
    runs: { type: "string", default: "3" },
    "max-foreign-cpus": { type: "string", default: "0.15" },
    "max-attempts": { type: "string", default: "8" },
    model: { type: "string", default: "smollm2-135m-instruct" },
    "models-dir": { type: "string" },
    gguf: { type: "string" },
    roofline: { type: "boolean", default: false },
  },
});

function positiveInts(flag: string, value: string): number[] {
  const list = value.split(",").map(Number);
  if (!list.every((n) => Number.isSafeInteger(n) && n > 0))
    throw new Error(`--${flag}: positive integers expected`);
  return list;
}

const engines = args.engines.split(",") as EngineName[];
for (const e of engines) if (!ENGINES.includes(e)) throw new Error(`--engines: unknown engine "${e}"`);
const threadCounts = positiveInts("threads", args.threads);
const [promptTokens] = positiveInts("prompt-tokens", args["prompt-tokens"]);
const [newTokens] = positiveInts("new-tokens", args["new-tokens"]);
const [runs] = positiveInts("runs", args.runs);
const [maxAttempts] = positiveInts("max-attempts", args["max-attempts"]);
const maxForeignCpus = Number(args["max-foreign-cpus"]);
if (!(maxForeignCpus > 0)) throw new Error("--max-foreign-cpus: positive number expected");
const modelDir = join(modelsDir(args["models-dir"]), args.model);
const log = (line: string) => process.stderr.write(`${line}\n`);

async function ggufPath(): Promise<string> {
  return args.gguf ?? (await sourceGguf(modelDir, ggufCacheDir()));
}

/**
 * `npm run bench` only sets up the model's default format. Setup is a no-op when
 * its stamp shows the format is current, and converts otherwise (also after a
 * converter upgrade left an older file behind).
 */
const ensured = new Set<ModelFormat>();
async function ensureFormat(format: ModelFormat): Promise<void> {
  if (ensured.has(format)) return;
  ensured.add(format);
  const { DEFAULT_MODEL_ID, runSetup } = await import("../src/cli/commands/setup.ts");
  if (args.model === DEFAULT_MODEL_ID) await runSetup({ format, modelsDir: args["models-dir"], log });
  else if (!existsSync(weightPath(modelDir, format)))
    throw new Error(`${weightPath(modelDir, format)} missing`);
}

async function open(name: EngineName, threads: number): Promise<BenchEngine> {
  switch (name) {
    case "ort-q4":
    case "ort-fp32": {
      const format = name === "ort-q4" ? "q4" : "fp32";
      await ensureFormat(format);
      return openOrtEngine(modelDir, format, threads);
    }
    case "llama.cpp":
      return openLlamaEngine(await ggufPath(), threads, promptTokens + newTokens + 16);
  }
}

/** llama.cpp's matmul weights in the GGUF: every 2-D tensor but the embedding (one row is read), unless tied. */
function ggufMatmulBytes(path: string): number {
  const g = openGguf(path);
  try {
    const tied = !g.tensor("output.weight");
    return g.tensors
      .filter((t) => t.dims.length === 2 && (tied || t.name !== "token_embd.weight"))
      .reduce((n, t) => n + t.byteLength, 0);
  } finally {
    g.close();
  }
}

/** What a decode step of this engine reads, for --roofline. */
async function decodeReads(name: EngineName, engine: BenchEngine): Promise<DecodeReads | undefined> {
  const weightBytes =
    name === "llama.cpp" ? ggufMatmulBytes(await ggufPath()) : await engine.weightBytesRead?.();
  if (!weightBytes) return undefined;
  const cfg = readModelConfig(modelDir).decoder;
  return {
    weightBytes,
    kvBytesPerPosition: cfg.numLayers * 2 * cfg.numKvHeads * cfg.headDim * 2,
    meanContext: meanDecodeContext(promptTokens, newTokens),
  };
}

async function measure(
  name: EngineName,
  threads: number,
  prompt: number[],
): Promise<[EngineResult, number[]]> {
  const t0 = nowSeconds();
  const engine = await open(name, threads);
  const loadSeconds = nowSeconds() - t0;
  try {
    // Warm-up: first runs pay for allocator growth and lazy kernel setup.
    await engine.prefill(prompt);
    await engine.decode(prompt, Math.min(newTokens, 16));
    const prefill: number[] = [];
    const decode: number[] = [];
    const foreign: (number | undefined)[] = [];
    const bandwidths: number[] = [];
    const reads = args.roofline ? await decodeReads(name, engine) : undefined;
    let ids: number[] = [];
    // Each timed run is repeated while other processes were busy during it (see contention.ts).
    const undisturbed = <T>(fn: () => Promise<T>) => runUndisturbed(fn, maxForeignCpus, maxAttempts);
    for (let r = 0; r < runs; r++) {
      const out = await undisturbed(() => engine.prefill(prompt));
      prefill.push(out.value.seconds);
      foreign.push(out.foreignCpus);
    }
    for (let r = 0; r < runs; r++) {
      const out = await undisturbed(async () => {
        // Right before the run: this machine's bandwidth moves by half from one minute to the next.
        if (reads) bandwidths.push(await readBandwidth());
        return engine.decode(prompt, newTokens);
      });
      decode.push(out.value.seconds);
      foreign.push(out.foreignCpus);
      ids = out.value.ids;
    }
    const result: EngineResult = {
      engine: engine.name,
      threads,
      loadSeconds,
      prefillTokensPerSecond: promptTokens / median(prefill),
      decodeTokensPerSecond: newTokens / median(decode),
      prefillSeconds: prefill,
      decodeSeconds: decode,
      worstForeignCpus: foreign.reduce<number | undefined>(
        (m, f) => (f === undefined ? m : Math.max(m ?? 0, f)),
        undefined,
      ),
      notes: engine.notes,
    };
    if (reads) {
      const bandwidth = median(bandwidths);
      result.roofline = {
        bytesPerToken: bytesPerToken(reads),
        bandwidthBytesPerSecond: bandwidth,
        share: rooflineShare(result.decodeTokensPerSecond, reads, bandwidth),
      };
    }
    log(
      `${engine.name} threads=${threads}: prefill ${result.prefillTokensPerSecond.toFixed(1)} tok/s, ` +
        `decode ${result.decodeTokensPerSecond.toFixed(1)} tok/s`,
    );
    return [result, ids];
  } finally {
    await engine.close();
  }
}

// Other work on the machine skews the numbers; record how busy it was.
const loadBefore = loadavg()[0];
const prompt = await benchPrompt(modelDir, promptTokens);
const results: EngineResult[] = [];
const greedyIds = new Map<string, number[]>();
for (const name of engines) {
  for (const threads of threadCounts) {
    const [result, ids] = await measure(name, threads, prompt);
    results.push(result);
    greedyIds.set(`${name}/${threads}`, ids);
  }
}
for (const r of results) {
  const ref = greedyIds.get(`llama.cpp/${r.threads}`);
  if (ref && r.engine !== "llama.cpp")
    r.agreesWithLlamaCpp = agreeingPrefix(greedyIds.get(`${r.engine}/${r.threads}`)!, ref);
}

const summary = {
  machine: {
    cpu: cpus()[0]?.model,
    instructionSets: vectorInstructionSets(),
    logicalCpus: cpus().length,
    node: process.version,
    loadAverage1m: { before: loadBefore, after: loadavg()[0] },
  },
  model: args.model,
  promptTokens,
  newTokens,
  runs,
  results,
};
if (args.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
else {
  console.log(
    `${args.model}: ${promptTokens}-token prompt, ${newTokens} greedy tokens, median of ${runs} runs; ` +
      `${cpus()[0]?.model} (${vectorInstructionSets().join(" ")}), load average ` +
      `${loadBefore.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after`,
  );
  console.log(markdownTable(results, newTokens));
}
