/**
 * Serving benchmark (`node bench/serving.ts`): ortserve's engine (worker pool, continuous batching)
 * next to llama.cpp (node-llama-cpp, its own multi-sequence batching) on the same GGUF, in one run.
 * Prints a table and, with --json, one JSON object.
 *
 *  - aggregate decode tok/s with 1/4/8/16 concurrent greedy streams (distinct 64-token prompts)
 *  - TTFT for 128, 512 and 1,024-token prompts
 *  - TTFT on a prefix-cache hit vs cold (ortserve; llama.cpp re-evaluates a cleared sequence)
 */
import { join } from "node:path";
import type { EngineCoreConfig, EngineRequest } from "../src/core/types.ts";
import { ggufCacheDir, modelsDir } from "../src/util/paths.ts";
import { EnginePool } from "../src/workers/pool.ts";
import { request as engineRequest } from "../test/engine/engine-helpers.ts";
import { benchPrompt } from "./prompt.ts";
import { openLlamaServing } from "./serving-llama.ts";
import { median, nowSeconds } from "./stats.ts";

const MODEL_DIR = join(modelsDir(), "smollm2-135m-instruct");
const GGUF = join(ggufCacheDir(), "SmolLM2-135M-Instruct.Q4_1.gguf");
const STREAMS = [1, 4, 8, 16];
const NEW_TOKENS = 96;
const TTFT_PROMPTS = [128, 512, 1024];
const json = process.argv.includes("--json");

/** Greedy, EOS ignored: every stream generates exactly `maxTokens`. */
function request(tokenIds: number[], maxTokens: number, cacheSalt?: string): EngineRequest {
  return engineRequest(tokenIds, { maxTokens, cacheSalt });
}

/** Runs one request; returns seconds to the first token and to the end. */
async function timed(
  pool: EnginePool,
  config: EngineCoreConfig,
  req: EngineRequest,
): Promise<{ ttft: number; total: number; tokens: number }> {
  const t0 = nowSeconds();
  let ttft = 0;
  let tokens = 0;
  for await (const e of pool.generate(config, req)) {
    if (e.type === "delta") {
      if (tokens === 0) ttft = nowSeconds() - t0;
      tokens += e.tokenIds.length;
    }
    if (e.type === "error") throw new Error(e.message);
  }
  return { ttft, total: nowSeconds() - t0, tokens };
}

async function benchOrtserve(prompts: number[][], long: Record<number, number[]>) {
  const config: EngineCoreConfig = {
    modelDir: MODEL_DIR,
    format: "q4",
    schedulingPolicy: "fcfs",
    maxNumSeqs: 16,
    maxModelLen: 2048,
    prefillChunk: 256,
    prefixCacheBytes: 256 << 20,
    intraOpThreads: 2,
    kvCacheDtype: "auto",
    jumpForward: true,
    grammarCompileTimeoutMs: 0,
    fairShare: true,
  };
  const pool = new EnginePool({ workers: 1, maxRequestsPerWorker: 64 });
  await timed(pool, config, request(prompts[0]!, 8, "warm-up"));
  const aggregate: Record<number, number> = {};
  for (const n of STREAMS) {
    const t0 = nowSeconds();
    const runs = await Promise.all(
      prompts.slice(0, n).map((p, i) => timed(pool, config, request(p, NEW_TOKENS, `agg-${n}-${i}`))),
    );
    aggregate[n] = runs.reduce((s, r) => s + r.tokens, 0) / (nowSeconds() - t0);
  }
  const ttft: Record<number, number> = {};
  for (const len of TTFT_PROMPTS) {
    const samples = [];
    for (let i = 0; i < 3; i++)
      samples.push((await timed(pool, config, request(long[len]!, 1, `cold-${len}-${i}`))).ttft);
    ttft[len] = median(samples);
  }
  const hit: number[] = [];
  await timed(pool, config, request(long[1024]!, 1, "hit"));
  for (let i = 0; i < 3; i++) hit.push((await timed(pool, config, request(long[1024]!, 1, "hit"))).ttft);
  await pool.close();
  return { aggregate, ttft, prefixHitTtft1024: median(hit) };
}

async function benchLlama(prompts: number[][], long: Record<number, number[]>) {
  const aggregate: Record<number, number> = {};
  for (const n of STREAMS) {
    const llama = await openLlamaServing(GGUF, {
      sequences: n,
      contextPerSequence: 64 + NEW_TOKENS + 8,
      threads: 2,
    });
    aggregate[n] = await llama.aggregate(prompts.slice(0, n), NEW_TOKENS);
    await llama.close();
  }
  const llama = await openLlamaServing(GGUF, { sequences: 1, contextPerSequence: 1100, threads: 2 });
  const ttft: Record<number, number> = {};
  for (const len of TTFT_PROMPTS) {
    const samples = [];
    for (let i = 0; i < 3; i++) samples.push(await llama.ttft(long[len]!));
    ttft[len] = median(samples);
  }
  await llama.close();
  return { aggregate, ttft };
}

async function main(): Promise<void> {
  const base = await benchPrompt(MODEL_DIR, 1100);
  // Distinct prompts per stream so no prefix is shared.
  const prompts =
    STREAMS.at(-1)! > 0 ? Array.from({ length: 16 }, (_, i) => base.slice(i * 60, i * 60 + 64)) : [];
  const long: Record<number, number[]> = {};
  for (const len of TTFT_PROMPTS) long[len] = base.slice(0, len);

  const ours = await benchOrtserve(prompts, long);
  const ref = await benchLlama(prompts, long);
  const result = { machine: "2 vCPU", newTokensPerStream: NEW_TOKENS, ortserve: ours, llamaCpp: ref };
  if (json) {
    console.log(JSON.stringify(result, null, 2));
    return;
  }
  const f = (v: number | undefined, d = 1) => (v === undefined ? "-" : v.toFixed(d));
  console.log("aggregate decode tok/s (greedy, 64-token prompts, 96 new tokens per stream)");
  console.log("streams | ortserve | llama.cpp");
  for (const n of STREAMS)
    console.log(
      `${String(n).padStart(7)} | ${f(ours.aggregate[n]).padStart(8)} | ${f(ref.aggregate[n]).padStart(9)}`,
    );
  console.log("\nTTFT ms (single request)");
  console.log("prompt | ortserve | llama.cpp");
  for (const len of TTFT_PROMPTS)
    console.log(
      `${String(len).padStart(6)} | ${f(ours.ttft[len]! * 1000, 0).padStart(8)} | ${f(ref.ttft[len]! * 1000, 0).padStart(9)}`,
    );
  console.log(
    `\nortserve TTFT for the 1,024-token prompt: cold ${f(ours.ttft[1024]! * 1000, 0)} ms, prefix-cache hit ${f(ours.prefixHitTtft1024 * 1000, 0)} ms`,
  );
}

await main();
