/**
 * Overload: a real `ortserve serve` process offered about 4x what it can run. With
 * `--max-num-seqs S` and `--max-waiting-requests W`, 4·S streaming clients and W+S non-streaming
 * clients, spread over several API keys (each capped by `--max-concurrent-requests-per-key`),
 * send chat completions back to back for `--seconds`; a refused client waits briefly and tries
 * again. Meanwhile /health is probed every 50 ms. Checks: /health p50/p99/max under 100 ms, every
 * admitted request completes (200 body or [DONE]), every refusal is a clean 503/429 (OpenAI error
 * body and Retry-After). Exits 1 when a check fails.
 *
 *   node bench/overload.ts [--max-num-seqs 4] [--max-waiting 8] [--per-key 3] [--keys 4]
 *                          [--seconds 30] [--max-tokens 48]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { generateKey } from "../src/storage/api-keys.ts";
import { openStorage } from "../src/storage/storage.ts";
import { repoRoot } from "../src/util/paths.ts";
import { startServerProcess } from "../test/e2e/server-process.ts";
import { type ChatResult, sendChat } from "./server-probe.ts";
import { percentile } from "./stats.ts";

const MODEL = "smollm2-135m-instruct";
const HEALTH_LIMIT_MS = 100;

const { values } = parseArgs({
  options: {
    "max-num-seqs": { type: "string", default: "4" },
    "max-waiting": { type: "string", default: "8" },
    "per-key": { type: "string", default: "3" },
    keys: { type: "string", default: "4" },
    seconds: { type: "string", default: "30" },
    "max-tokens": { type: "string", default: "48" },
  },
});
const seqs = Number(values["max-num-seqs"]);
const waiting = Number(values["max-waiting"]);
const perKey = Number(values["per-key"]);
const keyCount = Number(values.keys);
const seconds = Number(values.seconds);
const maxTokens = Number(values["max-tokens"]);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const root = mkdtempSync(join(tmpdir(), "ortserve-overload-"));
const dbPath = join(root, "ortserve.db");
const storage = openStorage(dbPath);
const keys = Array.from({ length: keyCount }, (_, i) => storage.keys.createKey(`overload-${i}`).key);
storage.close();

const server = await startServerProcess({
  modelsDir: join(repoRoot, "models"),
  dbPath,
  apiKey: generateKey(),
  extraArgs: [
    "--max-num-seqs",
    String(seqs),
    "--max-waiting-requests",
    String(waiting),
    "--max-concurrent-requests-per-key",
    String(perKey),
  ],
});

try {
  // Load the model first: the run measures serving, not the first load.
  const warm = await sendChat(server.url, keys[0]!, {
    model: MODEL,
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 2,
  });
  if (warm.outcome !== "complete") throw new Error(`warm-up failed: ${JSON.stringify(warm)}`);

  const streamers = 4 * seqs;
  const plain = waiting + seqs;
  const results: ChatResult[] = [];
  const statuses = new Map<number, number>();
  const deadline = performance.now() + seconds * 1000;

  async function client(i: number, stream: boolean): Promise<void> {
    const key = keys[i % keys.length]!;
    for (let k = 0; performance.now() < deadline; k++) {
      const r = await sendChat(server.url, key, {
        model: MODEL,
        messages: [{ role: "user", content: `Client ${i}, request ${k}: tell me about the sea.` }],
        max_tokens: maxTokens,
        ignore_eos: true,
        stream,
      });
      results.push(r);
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.outcome !== "complete") await sleep(250);
    }
  }

  const health: number[] = [];
  let healthFailures = 0;
  async function probeHealth(): Promise<void> {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      const res = await fetch(`${server.url}/health`);
      await res.arrayBuffer();
      health.push(performance.now() - t0);
      if (res.status !== 200) healthFailures++;
      await sleep(50);
    }
  }

  const t0 = performance.now();
  await Promise.all([
    ...Array.from({ length: streamers }, (_, i) => client(i, true)),
    ...Array.from({ length: plain }, (_, i) => client(streamers + i, false)),
    probeHealth(),
  ]);
  const wall = (performance.now() - t0) / 1000;

  const count = (o: ChatResult["outcome"]) => results.filter((r) => r.outcome === o).length;
  const tokens = results.reduce((n, r) => n + r.completionTokens, 0);
  const failed = results.filter((r) => r.outcome === "failed");
  const p = (q: number) => percentile(health, q).toFixed(1);
  const maxHealth = Math.max(...health);
  console.log(
    `overload: max-num-seqs ${seqs}, max-waiting-requests ${waiting}, per-key concurrency ${perKey} over ${keyCount} keys`,
  );
  console.log(
    `clients: ${streamers} streaming + ${plain} non-streaming = ${streamers + plain} for ${wall.toFixed(1)} s`,
  );
  console.log(
    `requests: ${results.length}; complete ${count("complete")}, refused ${count("refused")}, failed ${failed.length}`,
  );
  console.log(`statuses: ${[...statuses].map(([s, n]) => `${s}×${n}`).join(", ")}`);
  console.log(`completion tokens/s: ${(tokens / wall).toFixed(1)}`);
  console.log(
    `/health: ${health.length} probes, p50 ${p(50)} ms, p99 ${p(99)} ms, max ${maxHealth.toFixed(1)} ms, non-200 ${healthFailures}`,
  );
  for (const f of failed.slice(0, 5)) console.log(`  failed: ${f.status} ${f.detail}`);
  const ok = failed.length === 0 && healthFailures === 0 && maxHealth < HEALTH_LIMIT_MS;
  console.log(ok ? "PASS" : "FAIL");
  process.exitCode = ok ? 0 : 1;
} finally {
  await server.stop();
  rmSync(root, { recursive: true, force: true });
}
