/**
 * Soak: a real `ortserve serve` process under 16 concurrent clients for `--minutes` (default 60).
 * Each client picks, request by request, a streaming or non-streaming chat completion, sometimes
 * with n=2, logprobs or a compact-JSON schema (structured outputs), and sometimes hangs up
 * mid-request (an abort after a random delay).
 * Every `--sample-seconds` it records the server's RSS and open fds (/proc/<pid>), the engine's
 * running sequences and KV bytes (/metrics) and the completion tokens/s of that window. Reports
 * unexpected errors (anything but a complete response or our own hang-up), RSS growth after
 * warm-up (the first 20% of the run): the mean of the last tenth of the samples against the mean
 * of the first tenth after warm-up (single samples swing by tens of MiB as the allocator takes and
 * returns memory; the end sample is printed too), open fds before the clients started vs. after
 * they stopped (client sockets come and go in between), the most KV held in the last tenth vs.
 * during warm-up, throughput at the start vs. the end, and the gauges once the clients stopped
 * (running 0 and KV in use 0 expected). Exits 1 when any of these goals is not met.
 *
 * With `--smaps-dir`, it also copies the server's /proc/<pid>/smaps there every
 * `--smaps-every-minutes` (default 5), for `bench/smaps-diff.ts` to say whose pages grew.
 *
 *   node bench/soak.ts [--minutes 60] [--clients 16] [--sample-seconds 15] [--max-num-seqs 8]
 *                      [--smaps-dir DIR] [--smaps-every-minutes 5]
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { generateKey } from "../src/storage/api-keys.ts";
import { repoRoot } from "../src/util/paths.ts";
import { startServerProcess } from "../test/e2e/server-process.ts";
import { type ChatResult, engineGauges, MiB, processStats, sendChat } from "./server-probe.ts";

const MODEL = "smollm2-135m-instruct";

const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "60" },
    clients: { type: "string", default: "16" },
    "sample-seconds": { type: "string", default: "15" },
    "max-num-seqs": { type: "string", default: "8" },
    "smaps-dir": { type: "string" },
    "smaps-every-minutes": { type: "string", default: "5" },
  },
});
const minutes = Number(values.minutes);
const clients = Number(values.clients);
const sampleMs = Number(values["sample-seconds"]) * 1000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const CITY_SCHEMA = {
  type: "object",
  properties: {
    city_name: { type: "string", maxLength: 24 },
    country_name: { type: "string", maxLength: 24 },
    population_estimate: { type: "integer", minimum: 0 },
  },
  required: ["city_name", "country_name", "population_estimate"],
  additionalProperties: false,
};

/** Process stats once open fds are down to `target` (polled for up to 10 s), or the last reading. */
async function settledStats(pid: number, target: number) {
  let stats = processStats(pid);
  for (let i = 0; i < 40 && stats.openFds > target; i++) {
    await sleep(250);
    stats = processStats(pid);
  }
  return stats;
}

/** Seeded so two runs send the same mix. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const root = mkdtempSync(join(tmpdir(), "ortserve-soak-"));
const apiKey = generateKey();
const server = await startServerProcess({
  modelsDir: join(repoRoot, "models"),
  dbPath: join(root, "ortserve.db"),
  apiKey,
  extraArgs: ["--max-num-seqs", values["max-num-seqs"]!],
});
const pid = server.child.pid!;

interface Sample {
  atSeconds: number;
  rssMiB: number;
  openFds: number;
  running: number;
  kvMiB: number;
  mainHeapMiB: number;
  engineHeapMiB: number;
  mainCommittedMiB: number;
  engineCommittedMiB: number;
  templateCommittedMiB: number;
  tokensPerSecond: number;
}

try {
  // One plain and one constrained request first: the first constrained request starts the
  // grammar backend and its compile thread, which the server then keeps (not a leak per request).
  for (const extra of [{}, { structured_outputs: { json: CITY_SCHEMA, disable_any_whitespace: true } }]) {
    const warm = await sendChat(server.url, apiKey, {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 2,
      ...extra,
    });
    if (warm.outcome !== "complete") throw new Error(`warm-up failed: ${JSON.stringify(warm)}`);
  }
  // Open fds with no client connected (the warm-up's keep-alive connection closes after the
  // server's 5 s idle timeout): what the server holds by itself.
  await sleep(6000);
  const baseline = processStats(pid);

  const t0 = performance.now();
  const deadline = t0 + minutes * 60_000;
  const counts: Record<ChatResult["outcome"], number> = {
    complete: 0,
    refused: 0,
    disconnected: 0,
    failed: 0,
  };
  const unexpected: string[] = [];
  let windowTokens = 0;

  async function client(i: number): Promise<void> {
    const random = rng(i + 1);
    for (let k = 0; performance.now() < deadline; k++) {
      const r = random();
      const stream = r < 0.5;
      const body: Record<string, unknown> = {
        model: MODEL,
        messages: [{ role: "user", content: `Client ${i}, request ${k}: describe a city.` }],
        max_tokens: 8 + Math.floor(random() * 56),
        stream,
        temperature: 0.8,
      };
      if (random() < 0.2) body.n = 2;
      if (random() < 0.2) {
        body.logprobs = true;
        body.top_logprobs = 3;
      } else if (random() < 0.15) {
        // Compact JSON: its keys are forced, so rows carry jump-forward tokens in the step's pass.
        body.structured_outputs = { json: CITY_SCHEMA, disable_any_whitespace: true };
      }
      const controller = new AbortController();
      const hangUp = random() < 0.15;
      const timer = hangUp ? setTimeout(() => controller.abort(), 50 + random() * 1500) : undefined;
      const result = await sendChat(server.url, apiKey, body, controller.signal);
      clearTimeout(timer);
      counts[result.outcome]++;
      windowTokens += result.completionTokens;
      if (result.outcome === "failed" || result.outcome === "refused")
        unexpected.push(`${result.status} ${result.detail ?? ""}`.slice(0, 300));
    }
  }

  const smapsDir = values["smaps-dir"];
  async function smapsSnapshots(): Promise<void> {
    if (smapsDir === undefined) return;
    mkdirSync(smapsDir, { recursive: true });
    const everyMinutes = Number(values["smaps-every-minutes"]);
    // The last one a second before the clients stop, while the load is still on.
    for (let minute = 0; ; minute += everyMinutes) {
      const at = Math.min(t0 + minute * 60_000, deadline - 1000);
      await sleep(Math.max(0, at - performance.now()));
      // Read then write: smaps is generated as it is read.
      const name = `smaps-${String(Math.round((at - t0) / 1000)).padStart(4, "0")}s.txt`;
      writeFileSync(join(smapsDir, name), readFileSync(`/proc/${pid}/smaps`));
      if (at >= deadline - 1000) return;
    }
  }

  const samples: Sample[] = [];
  async function sampler(): Promise<void> {
    let last = performance.now();
    while (performance.now() < deadline) {
      await sleep(Math.min(sampleMs, Math.max(0, deadline - performance.now())));
      const now = performance.now();
      const proc = processStats(pid);
      const g = await engineGauges(server.url);
      samples.push({
        atSeconds: Math.round((now - t0) / 1000),
        rssMiB: proc.rssBytes / MiB,
        openFds: proc.openFds,
        running: g.running,
        kvMiB: g.kvBytes / MiB,
        mainHeapMiB: g.mainHeapBytes / MiB,
        engineHeapMiB: g.engineHeapBytes / MiB,
        mainCommittedMiB: g.mainHeapCommittedBytes / MiB,
        engineCommittedMiB: g.engineHeapCommittedBytes / MiB,
        templateCommittedMiB: g.templateHeapCommittedBytes / MiB,
        tokensPerSecond: windowTokens / ((now - last) / 1000),
      });
      const s = samples.at(-1)!;
      console.log(
        `t=${s.atSeconds}s rss ${s.rssMiB.toFixed(0)} MiB, fds ${s.openFds}, running ${s.running}, ` +
          `KV ${s.kvMiB.toFixed(1)} MiB, V8 heap main ${s.mainHeapMiB.toFixed(1)} / engine ${s.engineHeapMiB.toFixed(1)} MiB ` +
          `(committed ${s.mainCommittedMiB.toFixed(1)} / ${s.engineCommittedMiB.toFixed(1)}; templates ${s.templateCommittedMiB.toFixed(1)}), ` +
          `${s.tokensPerSecond.toFixed(1)} tok/s`,
      );
      windowTokens = 0;
      last = now;
    }
  }

  await Promise.all([...Array.from({ length: clients }, (_, i) => client(i)), sampler(), smapsSnapshots()]);

  // Every client has stopped: the engine must let go of every sequence and KV block.
  let idle = await engineGauges(server.url);
  for (let i = 0; i < 100 && (idle.running > 0 || idle.kvUsedBytes > 0); i++) {
    await sleep(50);
    idle = await engineGauges(server.url);
  }
  // Clients' keep-alive connections close on the server's idle timeout (5 s): a leaked fd is one
  // still open after that.
  const end = await settledStats(pid, baseline.openFds);

  const warmIndex = samples.findIndex((s) => s.atSeconds >= minutes * 60 * 0.2);
  const warmSample = samples[Math.max(0, warmIndex)]!;
  const lastSample = samples.at(-1)!;
  const first = samples[0]!;
  console.log(`\nsoak: ${minutes} min, ${clients} clients, max-num-seqs ${values["max-num-seqs"]}`);
  console.log(
    `requests: complete ${counts.complete}, hung up by the client ${counts.disconnected}, ` +
      `unexpected ${unexpected.length} (refused ${counts.refused}, failed ${counts.failed})`,
  );
  console.log(
    `RSS after warm-up (t=${warmSample.atSeconds}s) ${warmSample.rssMiB.toFixed(0)} MiB → end ${lastSample.rssMiB.toFixed(0)} MiB ` +
      `(${(lastSample.rssMiB - warmSample.rssMiB).toFixed(0)} MiB); peak ${(server.peakRssBytes() / MiB).toFixed(0)} MiB`,
  );
  console.log(
    `open fds: before the clients ${baseline.openFds}, first sample ${first.openFds}, last ${lastSample.openFds}, after the clients stopped and their connections closed ${end.openFds}`,
  );
  // The KV gauge is what the cache holds: it follows the longest rows of the moment and is given
  // back when they end, so no growth means the last tenth never held more than warm-up did.
  const maxKv = (xs: Sample[]) => Math.max(...xs.map((s) => s.kvMiB));
  const warmKv = maxKv(samples.slice(0, Math.max(1, warmIndex)));
  console.log(
    `KV held: first sample ${first.kvMiB.toFixed(1)} MiB, most during warm-up ${warmKv.toFixed(1)} MiB, ` +
      `most in the last tenth ${maxKv(samples.slice(-Math.max(1, Math.round(samples.length / 10)))).toFixed(1)} MiB, last ${lastSample.kvMiB.toFixed(1)} MiB`,
  );
  // Single windows swing with the request mix (n = 2, hang-ups): compare the mean of the first and
  // last tenth of the run after warm-up.
  const afterWarm = samples.slice(Math.max(0, warmIndex));
  const tenth = Math.max(1, Math.round(afterWarm.length / 10));
  const meanRate = (xs: Sample[]) => xs.reduce((a, s) => a + s.tokensPerSecond, 0) / xs.length;
  const meanRss = (xs: Sample[]) => xs.reduce((a, s) => a + s.rssMiB, 0) / xs.length;
  const startRss = meanRss(afterWarm.slice(0, tenth));
  const endRss = meanRss(afterWarm.slice(-tenth));
  console.log(
    `RSS, mean of the first ${tenth} samples after warm-up ${startRss.toFixed(0)} MiB → last ${tenth} ${endRss.toFixed(0)} MiB ` +
      `(${((endRss / startRss - 1) * 100).toFixed(1)}%)`,
  );
  // Not a goal, a clue: whose JavaScript heap moved with the resident set.
  const meanOf = (xs: Sample[], f: (s: Sample) => number) => xs.reduce((a, s) => a + f(s), 0) / xs.length;
  const firstToLast = (f: (s: Sample) => number) =>
    `${meanOf(afterWarm.slice(0, tenth), f).toFixed(1)} → ${meanOf(afterWarm.slice(-tenth), f).toFixed(1)} MiB`;
  console.log(
    `V8 heap in use, means of the same tenths: main ${firstToLast((s) => s.mainHeapMiB)}, ` +
      `engine workers ${firstToLast((s) => s.engineHeapMiB)}`,
  );
  console.log(
    `V8 heap committed, the same tenths: main ${firstToLast((s) => s.mainCommittedMiB)}, ` +
      `engine workers ${firstToLast((s) => s.engineCommittedMiB)}, ` +
      `template render threads ${firstToLast((s) => s.templateCommittedMiB)}`,
  );
  const startRate = meanRate(afterWarm.slice(0, tenth));
  const endRate = meanRate(afterWarm.slice(-tenth));
  console.log(
    `throughput: first ${tenth} window(s) after warm-up ${startRate.toFixed(1)} tok/s, last ${tenth} ${endRate.toFixed(1)} tok/s ` +
      `(${((endRate / startRate - 1) * 100).toFixed(1)}%)`,
  );
  console.log(
    `after the clients stopped: running ${idle.running}, KV in use ${idle.kvUsedBytes} bytes, queued ${idle.queued}`,
  );
  const checks: [string, boolean][] = [
    ["0 unexpected errors", unexpected.length === 0],
    ["RSS growth after warm-up < 5% (means of the first and last tenth)", endRss < startRss * 1.05],
    ["no growth in open fds (before the clients vs after they stopped)", end.openFds <= baseline.openFds],
    [
      "no growth in KV bytes (the last tenth's most vs warm-up's)",
      maxKv(samples.slice(-Math.max(1, Math.round(samples.length / 10)))) <= warmKv,
    ],
    ["throughput at the end within 10% of the start", endRate >= startRate * 0.9],
    ["every sequence and KV block released", idle.running === 0 && idle.kvUsedBytes === 0],
  ];
  for (const [name, met] of checks) console.log(`  ${met ? "met    " : "NOT MET"} ${name}`);
  for (const u of unexpected.slice(0, 5)) console.log(`  unexpected: ${u}`);
  const ok = checks.every(([, met]) => met);
  console.log(ok ? "PASS" : "FAIL");
  process.exitCode = ok ? 0 : 1;
} finally {
  await server.stop();
  rmSync(root, { recursive: true, force: true });
}
