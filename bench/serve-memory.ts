/**
 * Peak resident memory of a real `ortserve serve` process against what it has to hold: the packed
 * weights (`ortserve_packed_weight_bytes`, what BlockQuantMatMul keeps of the projections) plus
 * the KV budget (max-num-seqs x max-model-len positions at the cache's bytes per token, plus the
 * prefix cache's budget). The server serves the one model directory given; its peak (VmHWM) is
 * read three times: once listening, once the model has answered one short request (it loads on
 * the first), and after `--streams` concurrent streams of `--max-tokens` each (bench/http-load.ts,
 * the load of `npm run bench`'s target 6). Only one such server runs at a time: a 7B-shaped model
 * takes most of a small machine's memory.
 *
 *   node bench/serve-memory.ts --model-dir <dir> [--streams 16] [--max-tokens 128] [--threads 2]
 *                              [--max-num-seqs 16] [--max-model-len 2048] [--limit 1.2] [--json]
 *
 * `--streams 0` stops after the one request (a model too slow for a full load here).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { readModelConfig } from "../src/core/model/model-config.ts";
import { loadTransformersTokenizer } from "../src/core/runner/tokenizer.ts";
import { ENGINE_DEFAULTS } from "../src/engine/engine.ts";
import { startServerProcess } from "../test/e2e/server-process.ts";
import { vectorInstructionSets } from "./cpu-flags.ts";
import { httpLoad } from "./http-load.ts";
import { benchPrompt } from "./prompt.ts";

/** The figures a peak is judged by: bytes the server must hold, and its peak against them. */
export interface ServeMemory {
  packedWeightBytes: number;
  /** max-num-seqs x max-model-len x bytes per token, plus the prefix cache's budget. */
  kvBudgetBytes: number;
  peakRssBytes: number;
  /** peakRssBytes / (packedWeightBytes + kvBudgetBytes). */
  ratio: number;
}

/** /proc/<pid>/status figures in bytes: VmHWM, VmRSS, RssAnon, RssFile. */
export function residentMemory(pid: number): { peak: number; rss: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (key: string) => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB$`, "m").exec(status);
    if (!m) throw new Error(`no ${key} in /proc/${pid}/status`);
    return Number(m[1]) * 1024;
  };
  return { peak: kib("VmHWM"), rss: kib("VmRSS"), anon: kib("RssAnon"), file: kib("RssFile") };
}

/** One /metrics series' value, or undefined when the text has none. */
function metric(text: string, name: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(" ").at(-1));
}

/** The KV cache's bytes per token, from `ortserve_cache_config_info`'s label. */
function kvBytesPerToken(text: string): number {
  const m = /^ortserve_cache_config_info\{[^}]*bytes_per_token="(\d+)"/m.exec(text);
  if (!m) throw new Error("/metrics has no ortserve_cache_config_info: has the model loaded?");
  return Number(m[1]);
}

/**
 * A running server's peak so far against its packed weights and KV budget, from its /metrics and
 * /proc/<pid>/status. `maxNumSeqs` and `maxModelLen` are what it was started with (the model's own
 * limit applied); the prefix cache's budget is the engine's default. Throws when the projections
 * are not BlockQuantMatMul's (nothing reports packed bytes then).
 */
export async function serveMemory(
  url: string,
  pid: number,
  budget: { maxNumSeqs: number; maxModelLen: number },
): Promise<ServeMemory & { kvBytesPerToken: number; kvCacheBytesHeld: number | undefined }> {
  const peakRssBytes = residentMemory(pid).peak;
  const metrics = await (await fetch(`${url}/metrics`)).text();
  const packedWeightBytes = metric(metrics, "ortserve_packed_weight_bytes");
  if (packedWeightBytes === undefined)
    throw new Error(
      "/metrics has no ortserve_packed_weight_bytes: this model's projections are not BlockQuantMatMul's",
    );
  const perToken = kvBytesPerToken(metrics);
  const kvBudgetBytes = budget.maxNumSeqs * budget.maxModelLen * perToken + ENGINE_DEFAULTS.prefixCacheBytes;
  return {
    packedWeightBytes,
    kvBudgetBytes,
    peakRssBytes,
    ratio: peakRssBytes / (packedWeightBytes + kvBudgetBytes),
    kvBytesPerToken: perToken,
    kvCacheBytesHeld: metric(metrics, "ortserve_kv_cache_bytes"),
  };
}

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: {
      "model-dir": { type: "string" },
      streams: { type: "string", default: "16" },
      "max-tokens": { type: "string", default: "128" },
      threads: { type: "string", default: "2" },
      "max-num-seqs": { type: "string", default: "16" },
      "max-model-len": { type: "string", default: "2048" },
      limit: { type: "string", default: "1.2" },
      json: { type: "boolean", default: false },
    },
  });
  if (!args["model-dir"]) throw new Error("--model-dir <converted model directory> is required");
  const modelDir = resolve(args["model-dir"]);
  const model = basename(modelDir);
  const streams = Number(args.streams);
  const maxTokens = Number(args["max-tokens"]);
  const maxNumSeqs = Number(args["max-num-seqs"]);
  const config = readModelConfig(modelDir).decoder;
  const maxModelLen = Math.min(Number(args["max-model-len"]), config.maxPositions);
  const limit = Number(args.limit);
  for (const [name, v] of Object.entries({ streams, maxTokens, maxNumSeqs, maxModelLen, limit }))
    if (!Number.isFinite(v) || v < 0) throw new Error(`--${name}: expected a non-negative number`);
  const log = (line: string) => process.stderr.write(`${line}\n`);

  // Distinct 64-token user messages, none sharing a prefix block (as bench/targets.ts makes them).
  const text = await benchPrompt(modelDir, 16 * 90 + 64);
  const tokenizer = await loadTransformersTokenizer(modelDir);
  const prompts = Array.from({ length: Math.max(streams, 1) }, (_, i) =>
    tokenizer.decode(text.slice((i % 16) * 90, (i % 16) * 90 + 64)),
  );

  const tmp = mkdtempSync(join(tmpdir(), "ortserve-serve-memory-"));
  const apiKey = `bench-${process.pid}`;
  const server = await startServerProcess({
    // The models directory is the model's parent: the server serves what it finds there.
    modelsDir: dirname(modelDir),
    dbPath: join(tmp, "ortserve.db"),
    apiKey,
    extraArgs: [
      "--threads",
      args.threads,
      "--max-num-seqs",
      `${maxNumSeqs}`,
      "--max-model-len",
      `${maxModelLen}`,
      // A 7B shape on two shared cores may take longer than the default 10 minutes.
      "--request-timeout-s",
      "0",
    ],
  });
  const pid = server.child.pid!;
  try {
    const listening = residentMemory(pid);
    log(`listening: peak ${mib(listening.peak)} MiB`);
    const t0 = performance.now();
    // The model loads on its first request.
    const first = await httpLoad({
      baseURL: `${server.url}/v1`,
      apiKey,
      model,
      prompts: prompts.slice(0, 1),
      maxTokens: 8,
      // node:http waits for the headers as long as loading takes (fetch gives up at 5 minutes).
      minimal: true,
    });
    const loaded = residentMemory(pid);
    log(
      `loaded and answered ${first.results[0]!.completionTokens} tokens in ${((performance.now() - t0) / 1000).toFixed(0)} s: ` +
        `peak ${mib(loaded.peak)} MiB, resident ${mib(loaded.rss)} MiB (${mib(loaded.anon)} anonymous, ${mib(loaded.file)} file)`,
    );
    let load: Awaited<ReturnType<typeof httpLoad>> | undefined;
    if (streams > 0) {
      load = await httpLoad({
        baseURL: `${server.url}/v1`,
        apiKey,
        model,
        prompts: prompts.slice(0, streams),
        maxTokens,
        extraBody: (i) => ({ cache_salt: `serve-memory-${i}` }),
        minimal: true,
      });
      log(`${streams} streams: ${load.tokensPerSecond.toFixed(1)} tok/s`);
    }
    const served = residentMemory(pid);
    const result = await serveMemory(server.url, pid, { maxNumSeqs, maxModelLen });
    const report = {
      machine: {
        cpu: cpus()[0]?.model,
        instructionSets: vectorInstructionSets(),
        logicalCpus: cpus().length,
      },
      model: modelDir,
      streams,
      maxTokens,
      maxNumSeqs,
      maxModelLen,
      stages: { listening, loaded, served },
      tokensPerSecond: load?.tokensPerSecond,
      ...result,
      limit,
      met: result.ratio <= limit,
    };
    if (args.json) {
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      return;
    }
    console.log(
      `${model} on ${report.machine.cpu} (${report.machine.instructionSets.join(" ")}): peak RSS ` +
        `${mib(result.peakRssBytes)} MiB; packed weights ${mib(result.packedWeightBytes)} MiB + KV budget ` +
        `${mib(result.kvBudgetBytes)} MiB (${maxNumSeqs} x ${maxModelLen} positions x ${result.kvBytesPerToken} B + ` +
        `${mib(ENGINE_DEFAULTS.prefixCacheBytes)} MiB prefix cache) = ` +
        `${mib(result.packedWeightBytes + result.kvBudgetBytes)} MiB; ` +
        `ratio ${result.ratio.toFixed(2)} (limit ${limit}: ${report.met ? "met" : "not met"})`,
    );
  } finally {
    await server.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(0);
}

if (import.meta.main) await main();
