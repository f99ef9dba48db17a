/**
 * `npm run bench`: the performance targets, ortserve next to llama.cpp on the same GGUF in one run.
 * ortserve runs through the in-process Engine (the engine the server runs); llama.cpp through
 * node-llama-cpp at 1 and 2 threads, its best count taken. Each figure is the median of --runs
 * repetitions. Prints a table (figure, peer, ratio, met), writes bench/results/targets.json and two
 * charts (throughput vs concurrency, TTFT vs prompt length).
 *
 * Target 6 starts a real `ortserve serve` process and llama.cpp's `llama-server` (built once, see
 * bench/llama-server.ts) and puts the same 16-stream client load on both (bench/http-load.ts);
 * for ortserve it also reports the client's CPU and the ratio with a minimal reader, since the
 * client runs on the engine's cores.
 *
 * Any installed model: `--model <name>` (default SmolLM2-135M) under `--models-dir`; llama.cpp runs
 * the GGUF the model was converted from (src/models/source-gguf.ts, or `--gguf`). With
 * `--ik-llama-server <binary>`, ik_llama.cpp's server (`-rtr`) joins llama-server as a peer.
 *
 *   node bench/targets.ts [--runs 3] [--threads 2] [--out bench/results] [--json] [--skip-llama-server]
 *                         [--model <name>] [--models-dir <dir>] [--gguf <file>] [--ik-llama-server <binary>]
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { readModelConfig } from "../src/core/model/model-config.ts";
import { weightPath } from "../src/core/model/model-files.ts";
import { cacheRowElements } from "../src/core/runner/kv-slots.ts";
import { loadTransformersTokenizer } from "../src/core/runner/tokenizer.ts";
import type { KvCacheDtypeSetting } from "../src/core/types.ts";
import { Engine, type GenerateRequest } from "../src/engine/engine.ts";
import { sourceGguf } from "../src/models/source-gguf.ts";
import { ggufCacheDir, modelsDir } from "../src/util/paths.ts";
import { lineChart } from "../src/util/svg-chart.ts";
import { startServerProcess } from "../test/e2e/server-process.ts";
import { readBandwidth } from "./bandwidth.ts";
import { vectorInstructionSets } from "./cpu-flags.ts";
import { httpLoad } from "./http-load.ts";
import { openLlamaEngine } from "./llama-engine.ts";
import { ensureLlamaServer, serverDecodeRate, startLlamaServer } from "./llama-server.ts";
import { benchPrompt } from "./prompt.ts";
import { bytesPerToken, type DecodeReads, meanDecodeContext, rooflineShare } from "./roofline.ts";
import { type ServeMemory, serveMemory } from "./serve-memory.ts";
import { openLlamaServing } from "./serving-llama.ts";
import { median, nowSeconds } from "./stats.ts";
import { timed } from "./timed-request.ts";

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    threads: { type: "string", default: "2" },
    out: { type: "string", default: join(dirname(new URL(import.meta.url).pathname), "results") },
    json: { type: "boolean", default: false },
    "skip-llama-server": { type: "boolean", default: false },
    model: { type: "string", default: "smollm2-135m-instruct" },
    "models-dir": { type: "string" },
    gguf: { type: "string" },
    "ik-llama-server": { type: "string" },
  },
});
const RUNS = Number(args.runs);
const THREADS = Number(args.threads);
const MODEL = args.model;
const MODEL_DIR = join(modelsDir(args["models-dir"]), MODEL);
if (!existsSync(join(MODEL_DIR, "config.json")))
  throw new Error(
    `${MODEL_DIR}: no installed model (run \`ortserve pull\` / \`convert\`, or pass --models-dir)`,
  );
const GGUF = args.gguf ?? (await sourceGguf(MODEL_DIR, ggufCacheDir()));
const IK_LLAMA_SERVER = args["ik-llama-server"];
if (IK_LLAMA_SERVER && !existsSync(IK_LLAMA_SERVER))
  throw new Error(`--ik-llama-server ${IK_LLAMA_SERVER}: no such file`);
const INSTRUCTION_SETS = vectorInstructionSets();
const CPU_LABEL = `${cpus()[0]?.model ?? "unknown CPU"} (${INSTRUCTION_SETS.filter((f) => /^avx(2|512f|512_vnni)$/.test(f)).join(", ") || "no AVX2"})`;
/** The single-stream request: 128 prompt tokens, 256 new. */
const SINGLE = { prompt: 128, newTokens: 256 };
const STREAMS = [1, 4, 8, 16];
const TTFT_PROMPTS = [128, 512, 1024];
const MAX_NUM_SEQS = 16;
const MAX_MODEL_LEN = 2048;
const PREFIX_CACHE_BYTES = 256 << 20;
const log = (line: string) => process.stderr.write(`${line}\n`);

let salt = 0;
/** A greedy request that ignores EOS; a fresh cache salt keeps it off the prefix cache. */
function greedy(tokenIds: number[], maxTokens: number, cacheSalt = `run-${++salt}`): GenerateRequest {
  return {
    model: MODEL,
    prompt: { tokenIds },
    params: { maxTokens, cacheSalt, sampling: { temperature: 0, ignoreEos: true } },
  };
}

async function repeat(n: number, fn: () => Promise<number>): Promise<number> {
  const values: number[] = [];
  for (let i = 0; i < n; i++) values.push(await fn());
  return median(values);
}

function openEngine(kvCacheDtype: KvCacheDtypeSetting = "auto"): Promise<Engine> {
  return Engine.open({
    modelsDir: dirname(MODEL_DIR),
    workers: 1,
    threads: THREADS,
    maxNumSeqs: MAX_NUM_SEQS,
    maxModelLen: MAX_MODEL_LEN,
    prefixCacheBytes: PREFIX_CACHE_BYTES,
    kvCacheDtype,
  });
}

/**
 * Decode at 100 and at 1,500 tokens of context with an 8-bit KV cache (`--kv-cache-dtype int8`),
 * its own engine, the two lengths alternating.
 */
async function int8Context(text: number[]) {
  const engine = await openEngine("int8");
  await timed(engine, greedy(text.slice(0, 128), 16));
  const [at100, at1500] = await alternating(
    async () => (await timed(engine, greedy(text.slice(0, 100), 128))).decodeRate,
    async () => (await timed(engine, greedy(text.slice(0, 1500), 128))).decodeRate,
  );
  await engine.close();
  return { at100, at1500 };
}

/** The medians of RUNS rounds of a then b, so the machine's drift falls on both alike. */
async function alternating(a: () => Promise<number>, b: () => Promise<number>): Promise<[number, number]> {
  const as: number[] = [];
  const bs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    as.push(await a());
    bs.push(await b());
  }
  return [median(as), median(bs)];
}

/**
 * The weight bytes a decode step reads: the projections as BlockQuantMatMul packed them (half
 * scales and offsets where the GGUF had them: fewer bytes than the ONNX file's float ones) when
 * the engine runs it, else the ONNX file's bytes (MatMulNBits reads its initializers as stored).
 */
async function weightBytesRead(engine: Engine, onnxBytes: number): Promise<number> {
  for (const s of Object.values(await engine.stats())) {
    const packed = (s as { runtime?: { packedWeightBytes?: number } }).runtime?.packedWeightBytes;
    if (packed) return packed;
  }
  return onnxBytes;
}

/** The HTTP load's request in-process: the same user message through the chat template. */
function greedyChat(content: string, maxTokens: number): GenerateRequest {
  return {
    model: MODEL,
    prompt: { messages: [{ role: "user", content }] },
    params: { maxTokens, cacheSalt: `run-${++salt}`, sampling: { temperature: 0, ignoreEos: true } },
  };
}

async function ortserve(text: number[], streams: number[][], onnxBytes: number) {
  // Two engines, each warmed with a short request; one then serves a long prompt. The short
  // request then alternates between them, so the machine's drift (10% or more from one minute to
  // the next) falls on both sides alike instead of on whichever was measured second.
  const fresh = await openEngine();
  const afterLong = await openEngine();
  for (const e of [fresh, afterLong]) await timed(e, greedy(text.slice(0, 32), 8));
  await timed(afterLong, greedy(text.slice(0, 1400), 8));
  const [shortFresh, shortAfterLong] = await alternating(
    async () => (await timed(fresh, greedy(text.slice(0, 32), 128))).decodeRate,
    async () => (await timed(afterLong, greedy(text.slice(0, 32), 128))).decodeRate,
  );
  await fresh.close();
  await afterLong.close();

  const engine = await openEngine();
  await timed(engine, greedy(text.slice(0, 128), 16));
  const weightBytes = await weightBytesRead(engine, onnxBytes);
  // The bandwidth probe runs right before each single-stream run: this machine's bandwidth moves
  // by half from one minute to the next (29.6 and 48.0 GB/s a minute apart), so target 1's
  // share compares the two under the same conditions, as the other ratios alternate their sides.
  const bandwidths: number[] = [];
  const single = await repeat(RUNS, async () => {
    bandwidths.push(await readBandwidth());
    return (await timed(engine, greedy(text.slice(0, SINGLE.prompt), SINGLE.newTokens))).decodeRate;
  });
  // Target 2 divides one by the other: the two lengths alternate, as the int8 engine's do.
  const [at100, at1500] = await alternating(
    async () => (await timed(engine, greedy(text.slice(0, 100), 128))).decodeRate,
    async () => (await timed(engine, greedy(text.slice(0, 1500), 128))).decodeRate,
  );
  const ttft: Record<number, number> = {};
  for (const len of TTFT_PROMPTS)
    ttft[len] = await repeat(RUNS, async () => (await timed(engine, greedy(text.slice(0, len), 1))).ttft);

  // Prefix cache: 1,024 shared tokens + 32 of its own; the first request fills the cache.
  const prefix = text.slice(0, 1024);
  const withSuffix = (i: number) => [...prefix, ...text.slice(1100 + 32 * i, 1132 + 32 * i)];
  const cold = await repeat(RUNS, async () => (await timed(engine, greedy(withSuffix(0), 1))).ttft);
  await timed(engine, greedy(withSuffix(0), 1, "shared"));
  let hitIndex = 0;
  const hit = await repeat(
    RUNS,
    async () => (await timed(engine, greedy(withSuffix(++hitIndex), 1, "shared"))).ttft,
  );

  // Round by round over every concurrency, so the machine's drift falls on all of them alike
  // (target 4 divides the 16-stream point by the 1-stream one).
  const sweep = new Map<number, number[]>(STREAMS.map((n) => [n, []]));
  for (let round = 0; round < RUNS; round++)
    for (const n of STREAMS) {
      const t0 = nowSeconds();
      const runs = await Promise.all(streams.slice(0, n).map((p) => timed(engine, greedy(p, 128))));
      sweep.get(n)!.push(runs.reduce((s, r) => s + r.tokens, 0) / (nowSeconds() - t0));
    }
  const aggregate: Record<number, number> = {};
  for (const n of STREAMS) {
    aggregate[n] = median(sweep.get(n)!);
    log(`ortserve ${n} streams: ${aggregate[n]!.toFixed(1)} tok/s`);
  }
  await engine.close();
  return {
    weightBytes,
    bandwidth: median(bandwidths),
    single,
    at100,
    at1500,
    shortFresh,
    shortAfterLong,
    prefill1024: 1024 / ttft[1024]!,
    ttft,
    prefixCold: cold,
    prefixHit: hit,
    aggregate,
  };
}

async function llamaCpp(text: number[], streams: number[][]) {
  let single = 0;
  let prefill1024 = 0;
  const ttft: Record<number, number> = {};
  for (const threads of [1, 2]) {
    const engine = await openLlamaEngine(GGUF, threads, 1200 + 300);
    await engine.decode(text.slice(0, 128), 16);
    single = Math.max(
      single,
      SINGLE.newTokens /
        (await repeat(
          RUNS,
          async () => (await engine.decode(text.slice(0, SINGLE.prompt), SINGLE.newTokens)).seconds,
        )),
    );
    for (const len of TTFT_PROMPTS) {
      const t = await repeat(RUNS, async () => (await engine.prefill(text.slice(0, len))).seconds);
      ttft[len] = Math.min(ttft[len] ?? Number.POSITIVE_INFINITY, t);
    }
    prefill1024 = Math.max(prefill1024, 1024 / ttft[1024]!);
    await engine.close();
  }
  const aggregate: Record<number, number> = {};
  for (const n of STREAMS) {
    let best = 0;
    for (const threads of [1, 2]) {
      const llama = await openLlamaServing(GGUF, { sequences: n, contextPerSequence: 64 + 128 + 8, threads });
      best = Math.max(best, await repeat(RUNS, () => llama.aggregate(streams.slice(0, n), 128)));
      await llama.close();
    }
    aggregate[n] = best;
    log(`llama.cpp ${n} sequences: ${best.toFixed(1)} tok/s`);
  }
  return { single, prefill1024, ttft, aggregate };
}

/** Target 6: the same 16-stream HTTP load on a real `ortserve serve` process and on llama-server. */
async function http(prompts: string[], singleIds: number[]) {
  /** The HTTP load's median; `between` runs before each load (the in-process peer, alternating). */
  const measure = async (
    baseURL: string,
    apiKey: string,
    extraBody: () => Record<string, unknown>,
    between?: () => Promise<void>,
    minimal = false,
  ) => {
    const load = () =>
      httpLoad({ baseURL, apiKey, model: MODEL, prompts, maxTokens: 128, extraBody, minimal });
    await httpLoad({ baseURL, apiKey, model: MODEL, prompts: prompts.slice(0, 2), maxTokens: 8, extraBody });
    const runs = [];
    // The client's CPU (this process; the in-process peer's engine idles during the loads).
    let clientCpuSeconds = 0;
    let seconds = 0;
    let tokens = 0;
    for (let i = 0; i < RUNS; i++) {
      await between?.();
      const cpu0 = process.cpuUsage();
      const run = await load();
      const cpu = process.cpuUsage(cpu0);
      clientCpuSeconds += (cpu.user + cpu.system) / 1e6;
      seconds += run.seconds;
      tokens += run.results.reduce((s, x) => s + x.completionTokens, 0);
      runs.push(run);
    }
    const r = runs.map((x) => x.tokensPerSecond);
    const mid = runs.find((x) => x.tokensPerSecond === median(r)) ?? runs[0]!;
    return {
      tokensPerSecond: median(r),
      medianTtft: mid.medianTtft,
      promptTokens: mid.results.map((x) => x.promptTokens ?? 0),
      completionTokens: mid.results.reduce((s, x) => s + x.completionTokens, 0),
      tokensFromUsage: mid.results.every((x) => x.fromUsage),
      clientCpuMicrosPerToken: (1e6 * clientCpuSeconds) / tokens,
      /** The client's CPU over the loads' wall time and this machine's logical CPUs. */
      clientCpuShare: clientCpuSeconds / seconds / cpus().length,
    };
  };
  // ortserve as `npm start` runs it, shaped like the in-process engine; the prefix cache is kept
  // out of the way with a fresh cache_salt per request, as in-process.
  const tmp = mkdtempSync(join(tmpdir(), "ortserve-bench-"));
  const apiKey = `bench-${process.pid}`;
  const server = await startServerProcess({
    modelsDir: dirname(MODEL_DIR),
    dbPath: join(tmp, "ortserve.db"),
    apiKey,
    // Shaped like openEngine(); later flags win over the helper's own --max-num-seqs 8.
    extraArgs: [
      "--threads",
      `${THREADS}`,
      "--max-num-seqs",
      `${MAX_NUM_SEQS}`,
      "--max-model-len",
      `${MAX_MODEL_LEN}`,
    ],
  });
  // The in-process peer: exactly these requests (the same user messages through the chat
  // template) on an in-process engine of the same shape, its rounds alternating with the HTTP
  // loads so the machine's drift falls on both alike. Idle, its pool threads do not spin.
  const engine = await openEngine();
  await timed(engine, greedyChat(prompts[0]!, 8));
  /** One in-process round of the load, its rate added to `into`. */
  const inProcess = (into: number[]) => async () => {
    const t0 = nowSeconds();
    const runs = await Promise.all(prompts.map((p) => timed(engine, greedyChat(p, 128))));
    into.push(runs.reduce((s, r) => s + r.tokens, 0) / (nowSeconds() - t0));
  };
  let ortserveHttp: Awaited<ReturnType<typeof measure>> & {
    memory: ServeMemory;
    inProcess: number;
    minimalClient: Awaited<ReturnType<typeof measure>> & { inProcess: number };
  };
  try {
    const salted = () => ({ cache_salt: `http-${++salt}` });
    const inProcessOfficial: number[] = [];
    const m = await measure(`${server.url}/v1`, apiKey, salted, inProcess(inProcessOfficial));
    // The same requests read by a minimal client, alternating with in-process likewise: what the
    // server's streaming costs without the official client's own CPU on the engine's cores.
    const inProcessMinimal: number[] = [];
    const minimal = await measure(`${server.url}/v1`, apiKey, salted, inProcess(inProcessMinimal), true);
    // The server's own peak (VmHWM) against its packed weights and KV budget, read while it still
    // runs: this bench process holds other things (the bandwidth probe's buffer, llama.cpp) that
    // are not the server's.
    ortserveHttp = {
      ...m,
      memory: await serveMemory(server.url, server.child.pid!, {
        maxNumSeqs: MAX_NUM_SEQS,
        maxModelLen: Math.min(MAX_MODEL_LEN, readModelConfig(MODEL_DIR).decoder.maxPositions),
      }),
      inProcess: median(inProcessOfficial),
      minimalClient: { ...minimal, inProcess: median(inProcessMinimal) },
    };
  } finally {
    await engine.close();
    await server.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
  log(
    `ortserve HTTP 16 streams: ${ortserveHttp.tokensPerSecond.toFixed(1)} tok/s; ` +
      `the same requests in-process, alternating: ${ortserveHttp.inProcess.toFixed(1)} tok/s; ` +
      `with a minimal client ${ortserveHttp.minimalClient.tokensPerSecond.toFixed(1)} vs ` +
      `${ortserveHttp.minimalClient.inProcess.toFixed(1)} tok/s`,
  );
  if (args["skip-llama-server"])
    return { ortserve: ortserveHttp, llamaServer: undefined, ikLlamaServer: undefined };
  /**
   * A llama-server build at 1 and 2 threads: 16 slots of 512 tokens (prompt + 128 new fit), its
   * prompt cache off, the 16-stream load; and single-stream decode on the bench's prompt ids as
   * the server times it. A failure is reported, not fatal: the rest of the table still stands.
   */
  const serverPeer = async (name: string, binary?: string, extraArgs?: string[]) => {
    let best: (Awaited<ReturnType<typeof measure>> & { threads: number }) | undefined;
    const byThreads: Record<number, number> = {};
    const singleByThreads: Record<number, number> = {};
    const failures: string[] = [];
    for (const threads of [1, 2]) {
      try {
        const llama = await startLlamaServer({
          gguf: GGUF,
          parallel: 16,
          ctxSize: 16 * 512,
          threads,
          binary,
          extraArgs,
        });
        try {
          await serverDecodeRate(llama.baseURL, singleIds, 8);
          singleByThreads[threads] = await repeat(RUNS, () =>
            serverDecodeRate(llama.baseURL, singleIds, SINGLE.newTokens),
          );
          const m = await measure(llama.baseURL, "none", () => ({ cache_prompt: false }));
          byThreads[threads] = m.tokensPerSecond;
          log(
            `${name} ${threads} threads: single stream ${fmt(singleByThreads[threads]!)} tok/s, ` +
              `16 streams ${fmt(m.tokensPerSecond)} tok/s`,
          );
          if (!best || m.tokensPerSecond > best.tokensPerSecond) best = { ...m, threads };
        } finally {
          await llama.stop();
        }
      } catch (error) {
        failures.push(`${threads} threads: ${(error as Error).message}`);
        log(`${name} ${threads} threads failed: ${(error as Error).message}`);
      }
    }
    const single = Math.max(0, ...Object.values(singleByThreads));
    return { best: best && { ...best, byThreads }, single: single || undefined, singleByThreads, failures };
  };
  const llamaServer = await serverPeer("llama-server");
  const ikLlamaServer = IK_LLAMA_SERVER
    ? await serverPeer("ik_llama.cpp llama-server -rtr", IK_LLAMA_SERVER, ["-rtr"])
    : undefined;
  return { ortserve: ortserveHttp, llamaServer, ikLlamaServer };
}

interface Target {
  id: number;
  name: string;
  ours: string;
  peer: string;
  ratio: number | undefined;
  goal: string;
  met: boolean | undefined;
}

function fmt(v: number, digits = 1): string {
  return v.toFixed(digits);
}

async function main(): Promise<void> {
  if (!args["skip-llama-server"]) await ensureLlamaServer();
  const text = await benchPrompt(MODEL_DIR, 1600);
  // Distinct 64-token prompts, one per stream, none sharing a prefix block.
  const streams = Array.from({ length: 16 }, (_, i) => text.slice(i * 90, i * 90 + 64));
  const cfg = readModelConfig(MODEL_DIR).decoder;
  const onnx = weightPath(MODEL_DIR, "q4");
  const weightBytes = statSync(onnx).size + statSync(`${onnx}_data`).size;

  const tokenizer = await loadTransformersTokenizer(MODEL_DIR);
  const chatPrompts = streams.map((ids) => tokenizer.decode(ids));
  log("measuring ortserve");
  const ours = await ortserve(text, streams, weightBytes);
  const int8 = await int8Context(text);
  log("measuring llama.cpp");
  const peer = await llamaCpp(text, streams);
  log("measuring HTTP: ortserve serve and llama-server");
  const web = await http(chatPrompts, text.slice(0, SINGLE.prompt));

  // Target 1's limit: the bytes a step reads (packed matmul weights + the float16 KV cache of the
  // mean context) over the bandwidth measured right before the runs.
  const { bandwidth } = ours;
  const reads: DecodeReads = {
    weightBytes: ours.weightBytes,
    kvBytesPerPosition: cfg.numLayers * 2 * cfg.numKvHeads * cfg.headDim * 2,
    meanContext: meanDecodeContext(SINGLE.prompt, SINGLE.newTokens),
  };
  const roofline = bandwidth / bytesPerToken(reads);
  const share = rooflineShare(ours.single, reads, bandwidth);
  // The goal at the sizes where decode is bound by reading weights; a 135M model is
  // bound by per-token overheads, where the older goal stands.
  const shareGoal = ours.weightBytes >= 5e8 ? 0.8 : 0.5;
  const serverRow = (name: string, p: { single?: number; failures: string[] } | undefined, goal: number) =>
    t(
      1,
      `single-stream decode tok/s vs ${name}`,
      fmt(ours.single),
      p?.single ? fmt(p.single) : p?.failures.length ? "failed (see log)" : "not run",
      p?.single && ours.single / p.single,
      `>= ${goal}x`,
      p?.single ? ours.single >= goal * p.single : undefined,
    );
  // Target 2's ceiling where decode is bound by memory bandwidth: a step reads the weights and
  // every cached position, so 1,500 positions can be at best (weights + 100 positions' cache) /
  // (weights + 1,500 positions') as fast as 100.
  const cachePositionBytes = {
    float16: cfg.numLayers * 2 * cfg.numKvHeads * cfg.headDim * 2,
    int8: cfg.numLayers * 2 * cfg.numKvHeads * cacheRowElements("int8", cfg.headDim),
  };
  const contextCeiling = Object.fromEntries(
    Object.entries(cachePositionBytes).map(([dtype, bytes]) => [
      dtype,
      (ours.weightBytes + 100 * bytes) / (ours.weightBytes + 1500 * bytes),
    ]),
  );
  const t = (
    id: number,
    name: string,
    ours: string,
    peer: string,
    ratio: number | undefined,
    goal: string,
    met: boolean | undefined,
  ): Target => ({ id, name, ours, peer, ratio, goal, met });
  const targets: Target[] = [
    t(
      1,
      "single-stream decode tok/s (128 + 256)",
      fmt(ours.single),
      fmt(peer.single),
      ours.single / peer.single,
      ">= 1.3x",
      ours.single >= 1.3 * peer.single,
    ),
    serverRow("llama-server (HTTP, its own timing)", web.llamaServer, 1.3),
    serverRow("ik_llama.cpp -rtr (HTTP, its own timing)", web.ikLlamaServer, 1.05),
    t(
      1,
      "share of the bandwidth roofline",
      fmt(ours.single),
      `${fmt(roofline)} limit`,
      share,
      `>= ${shareGoal}`,
      share >= shareGoal,
    ),
    t(
      2,
      "decode at 1,500 vs 100 tokens of context",
      fmt(ours.at1500),
      `${fmt(ours.at100)} (own, at 100)`,
      ours.at1500 / ours.at100,
      ">= 0.8",
      ours.at1500 >= 0.8 * ours.at100,
    ),
    t(
      2,
      "the same with an int8 KV cache (--kv-cache-dtype int8)",
      fmt(int8.at1500),
      `${fmt(int8.at100)} (own, at 100)`,
      int8.at1500 / int8.at100,
      ">= 0.8",
      int8.at1500 >= 0.8 * int8.at100,
    ),
    t(
      2,
      "short request after a long one vs fresh",
      fmt(ours.shortAfterLong),
      `${fmt(ours.shortFresh)} (own, fresh)`,
      ours.shortAfterLong / ours.shortFresh,
      ">= 0.95",
      ours.shortAfterLong >= 0.95 * ours.shortFresh,
    ),
    t(
      3,
      "prefill tok/s, 1,024-token prompt",
      fmt(ours.prefill1024, 0),
      fmt(peer.prefill1024, 0),
      ours.prefill1024 / peer.prefill1024,
      ">= 1.2x",
      ours.prefill1024 >= 1.2 * peer.prefill1024,
    ),
    ...TTFT_PROMPTS.map((len) =>
      t(
        3,
        `TTFT ms, ${len}-token prompt`,
        fmt(ours.ttft[len]! * 1000, 0),
        fmt(peer.ttft[len]! * 1000, 0),
        ours.ttft[len]! / peer.ttft[len]!,
        "<= 1x",
        ours.ttft[len]! <= peer.ttft[len]!,
      ),
    ),
    t(
      4,
      "16 streams vs own single stream",
      fmt(ours.aggregate[16]!),
      `${fmt(ours.aggregate[1]!)} (own, 1 stream)`,
      ours.aggregate[16]! / ours.aggregate[1]!,
      ">= 4x",
      ours.aggregate[16]! >= 4 * ours.aggregate[1]!,
    ),
    t(
      4,
      "16 streams vs llama.cpp 16 sequences",
      fmt(ours.aggregate[16]!),
      fmt(peer.aggregate[16]!),
      ours.aggregate[16]! / peer.aggregate[16]!,
      ">= 2x",
      ours.aggregate[16]! >= 2 * peer.aggregate[16]!,
    ),
    t(
      5,
      "prefix-hit TTFT vs cold (1,024 + 32)",
      fmt(ours.prefixHit * 1000, 0),
      `${fmt(ours.prefixCold * 1000, 0)} (own, cold)`,
      ours.prefixHit / ours.prefixCold,
      "<= 0.1",
      ours.prefixHit <= 0.1 * ours.prefixCold,
    ),
    t(
      6,
      "HTTP 16 streams vs the same requests in-process",
      fmt(web.ortserve.tokensPerSecond),
      `${fmt(web.ortserve.inProcess)} (own, in-process)`,
      web.ortserve.tokensPerSecond / web.ortserve.inProcess,
      ">= 0.95",
      web.ortserve.tokensPerSecond >= 0.95 * web.ortserve.inProcess,
    ),
    ...(
      [
        ["llama-server", web.llamaServer],
        ["ik_llama.cpp -rtr", web.ikLlamaServer],
      ] as const
    )
      .filter(([name, p]) => p || name === "llama-server")
      .map(([name, p]) =>
        t(
          6,
          `HTTP 16 streams vs ${name}`,
          fmt(web.ortserve.tokensPerSecond),
          p?.best
            ? `${fmt(p.best.tokensPerSecond)} (${p.best.threads} thr)`
            : p?.failures.length
              ? "failed (see log)"
              : "not run",
          p?.best && web.ortserve.tokensPerSecond / p.best.tokensPerSecond,
          "> 1x",
          p?.best && web.ortserve.tokensPerSecond > p.best.tokensPerSecond,
        ),
      ),
    t(
      7,
      "peak RSS MiB of `ortserve serve`, 16 streams, vs packed weights + KV budget",
      fmt(web.ortserve.memory.peakRssBytes / 2 ** 20, 0),
      `${fmt(web.ortserve.memory.packedWeightBytes / 2 ** 20, 0)} + ${fmt(web.ortserve.memory.kvBudgetBytes / 2 ** 20, 0)}`,
      web.ortserve.memory.ratio,
      "<= 1.2",
      web.ortserve.memory.ratio <= 1.2,
    ),
    t(8, "fidelity (npm run fidelity)", "-", "-", undefined, ">= 99% decisive top-1", undefined),
  ];

  const report = {
    machine: {
      cpu: cpus()[0]?.model,
      instructionSets: INSTRUCTION_SETS,
      logicalCpus: cpus().length,
      node: process.version,
    },
    model: MODEL,
    gguf: basename(GGUF),
    runs: RUNS,
    ortserveThreads: THREADS,
    weightBytes,
    weightBytesReadPerStep: ours.weightBytes,
    readBandwidthBytesPerSecond: bandwidth,
    decodeReads: reads,
    bytesReadPerToken: bytesPerToken(reads),
    rooflineTokensPerSecond: roofline,
    rooflineShare: share,
    ortserve: ours,
    ortserveInt8Kv: int8,
    contextCeiling,
    llamaCpp: peer,
    http: web,
    targets,
  };
  mkdirSync(args.out, { recursive: true });
  writeFileSync(join(args.out, "targets.json"), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(
    join(args.out, "throughput-vs-concurrency.svg"),
    lineChart(
      [
        { name: "ortserve", points: STREAMS.map((n) => [n, ours.aggregate[n]!]) },
        { name: "llama.cpp (node-llama-cpp)", points: STREAMS.map((n) => [n, peer.aggregate[n]!]) },
        { name: "ortserve over HTTP", points: [[16, web.ortserve.tokensPerSecond]] },
        ...(
          [
            ["llama-server over HTTP", web.llamaServer?.best],
            ["ik_llama.cpp -rtr over HTTP", web.ikLlamaServer?.best],
          ] as const
        )
          .filter(([, best]) => best)
          .map(([name, best]) => ({ name, points: [[16, best!.tokensPerSecond] as [number, number]] })),
      ],
      {
        title: `${MODEL} on ${CPU_LABEL}: aggregate decode`,
        xLabel: "concurrent streams",
        yLabel: "tokens / s",
      },
    ),
  );
  writeFileSync(
    join(args.out, "ttft-vs-prompt.svg"),
    lineChart(
      [
        { name: "ortserve", points: TTFT_PROMPTS.map((n) => [n, ours.ttft[n]! * 1000]) },
        { name: "llama.cpp (node-llama-cpp)", points: TTFT_PROMPTS.map((n) => [n, peer.ttft[n]! * 1000]) },
      ],
      { title: `${MODEL} on ${CPU_LABEL}: time to first token`, xLabel: "prompt tokens", yLabel: "ms" },
    ),
  );
  if (args.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    return;
  }
  console.log(
    `${MODEL} (${basename(onnx)}, ${fmt(weightBytes / 2 ** 20)} MiB; llama.cpp on ${basename(GGUF)}) on ` +
      `${cpus()[0]?.model} (${INSTRUCTION_SETS.join(" ")}), ${cpus().length} logical CPUs; ` +
      `a decode step reads ${fmt(ours.weightBytes / 2 ** 20)} MiB of packed weights + ` +
      `${fmt((reads.kvBytesPerPosition * reads.meanContext) / 2 ** 20)} MiB of KV cache, ` +
      `read bandwidth ${fmt(bandwidth / 1e9)} GB/s, ortserve ${THREADS} threads, median of ${RUNS}`,
  );
  if (!args["skip-llama-server"] && !IK_LLAMA_SERVER)
    console.log("ik_llama.cpp: not measured (no --ik-llama-server <binary> given)");
  console.log(
    `target 2's bandwidth ceiling (weights + cache read per step, 1,500 vs 100 positions): ` +
      Object.entries(contextCeiling)
        .map(([dtype, ratio]) => `${dtype} cache ${ratio.toFixed(2)}`)
        .join(", "),
  );
  const { ortserve: web6 } = web;
  console.log(
    `target 6's client on the engine's cores: the official client took ` +
      `${fmt(100 * web6.clientCpuShare)}% of this machine's CPU (${fmt(web6.clientCpuMicrosPerToken, 0)} µs a ` +
      `streamed token); a minimal reader (node:http, no parsing: ` +
      `${fmt(web6.minimalClient.clientCpuMicrosPerToken, 0)} µs a token) got ` +
      `${fmt(web6.minimalClient.tokensPerSecond)} tok/s against ${fmt(web6.minimalClient.inProcess)} in-process ` +
      `(${(web6.minimalClient.tokensPerSecond / web6.minimalClient.inProcess).toFixed(2)})`,
  );
  console.log("| # | target | ortserve | peer | ratio | goal | met |");
  console.log("|---|---|---|---|---|---|---|");
  for (const x of targets)
    console.log(
      `| ${x.id} | ${x.name} | ${x.ours} | ${x.peer} | ${x.ratio === undefined ? "-" : x.ratio.toFixed(2)} | ${x.goal} | ${x.met === undefined ? "not measured here" : x.met ? "met" : "not met"} |`,
    );
}

await main();
