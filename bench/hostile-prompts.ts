/**
 * Hostile prompts beside a running stream: a real `ortserve serve` process streams one chat
 * completion (its gaps between chunks measured alone first), then again while hostile requests
 * arrive — 5 MB of one character, 3 MB of random words, a 100,000-id token array, a 50,000-entry
 * logit_bias, 1,000 stop strings of 1 KB — and a small request is sent meanwhile. Prints the
 * stream's longest gap alone and under attack, the bound (2 x alone + one step), each hostile
 * request's status and time, and the small request's time. Exits 1 when the bound or the small
 * request's second is missed.
 *
 *   node bench/hostile-prompts.ts [--max-tokens 160]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { generateKey } from "../src/storage/api-keys.ts";
import { repoRoot } from "../src/util/paths.ts";
import { startServerProcess } from "../test/e2e/server-process.ts";

const MODEL = "smollm2-135m-instruct";

/**
 * The stream is read on a thread of its own: this thread's work for the hostile bodies (their
 * upload, its garbage) must not show up as gaps in the server's stream.
 */
if (!isMainThread) {
  const { url, apiKey, maxTokens } = workerData as { url: string; apiKey: string; maxTokens: number };
  parentPort!.postMessage(await streamGaps(url, apiKey, maxTokens));
  process.exit(0);
}

const { values } = parseArgs({
  options: { "max-tokens": { type: "string", default: "160" }, only: { type: "string" } },
});
const maxTokens = Number(values["max-tokens"]);
/** `--only 0,2`: send only those hostile requests (by their place in the list), to tell their costs apart. */
const only = values.only?.split(",").map(Number);

const root = mkdtempSync(join(tmpdir(), "ortserve-hostile-"));
const apiKey = generateKey();
const server = await startServerProcess({
  modelsDir: join(repoRoot, "models"),
  dbPath: join(root, "ortserve.db"),
  apiKey,
});
const headers = { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" };

/** Bodies are serialized before they are timed: the client's own work must not stall its stream reader. */
async function post(
  path: string,
  body: string | Uint8Array,
): Promise<{ status: number; ms: number; text: string }> {
  const t0 = performance.now();
  const res = await fetch(`${server.url}${path}`, { method: "POST", headers, body });
  const text = await res.text();
  return { status: res.status, ms: performance.now() - t0, text };
}

/** One stream's gaps between chunks (ms), from its first chunk on. */
async function streamGaps(url: string, key: string, tokens: number): Promise<number[]> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: "Tell a long story about a lighthouse keeper." }],
      max_tokens: tokens,
      min_tokens: tokens,
      stream: true,
    }),
  });
  const gaps: number[] = [];
  let last: number | undefined;
  for await (const _chunk of res.body!) {
    const now = performance.now();
    if (last !== undefined) gaps.push(now - last);
    last = now;
  }
  return gaps;
}

/** `streamGaps` on a thread of its own. */
function streamGapsOnThread(url: string, key: string, tokens: number): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), {
      workerData: { url, apiKey: key, maxTokens: tokens },
    });
    worker.once("message", resolve);
    worker.once("error", reject);
  });
}

const chat = (content: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 4, ...extra });
const words = ["harbor", "lamp", "tide", "stone", "gull", "rope", "salt", "keel", "mist", "beam"];
let randomWords = "";
while (randomWords.length < 3_000_000) randomWords += `${words[Math.floor(Math.random() * words.length)]} `;
const hostile: [string, string, string][] = [
  ["5 MB of one character", "/v1/chat/completions", chat("a".repeat(5_000_000))],
  ["3 MB of random words", "/v1/chat/completions", chat(randomWords)],
  [
    "100,000-id token array",
    "/v1/completions",
    JSON.stringify({
      model: MODEL,
      prompt: Array.from({ length: 100_000 }, (_, i) => i % 40_000),
      max_tokens: 4,
    }),
  ],
  [
    "50,000-entry logit_bias",
    "/v1/chat/completions",
    chat("hi", { logit_bias: Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [String(i), 1])) }),
  ],
  [
    "1,000 stop strings of 1 KB",
    "/v1/chat/completions",
    chat("hi", { stop: Array.from({ length: 1000 }, (_, i) => `${i}`.padEnd(1024, "x")) }),
  ],
];

try {
  // Warm up (the model loads on its first request), then the stream alone.
  await post("/v1/chat/completions", chat("hello"));
  const alone = await streamGapsOnThread(server.url, apiKey, maxTokens);
  const aloneMax = Math.max(...alone);
  const step = alone.slice().sort((a, b) => a - b)[Math.floor(alone.length / 2)]!;

  const attacked = streamGapsOnThread(server.url, apiKey, maxTokens);
  await new Promise((r) => setTimeout(r, 300));
  const chosen = only ? hostile.filter((_, i) => only.includes(i)) : hostile;
  const encoded = chosen.map(([name, path, body]) => [name, path, Buffer.from(body)] as const);
  const hostileRuns = encoded.map(([name, path, body]) => post(path, body).then((r) => ({ name, ...r })));
  await new Promise((r) => setTimeout(r, 200));
  const small = await post("/v1/chat/completions", chat("Say hi.", { max_tokens: 2 }));
  const results = await Promise.all(hostileRuns);
  const underAttack = await attacked;
  const attackedMax = Math.max(...underAttack);
  const bound = 2 * aloneMax + step;

  for (const r of results) {
    const why =
      r.status === 200 ? "" : ` ${(JSON.parse(r.text) as { error: { message: string } }).error.message}`;
    console.log(`${r.name.padEnd(28)} ${r.status} in ${r.ms.toFixed(0)} ms${why.slice(0, 140)}`);
  }
  console.log(`small request: ${small.status} in ${small.ms.toFixed(0)} ms`);
  console.log(
    `stream: longest gap alone ${aloneMax.toFixed(0)} ms (median ${step.toFixed(0)} ms), ` +
      `under attack ${attackedMax.toFixed(0)} ms; bound 2 x alone + one step = ${bound.toFixed(0)} ms`,
  );
  const ok = attackedMax < bound && small.ms < 1000 && small.status === 200;
  console.log(ok ? "PASS" : "FAIL");
  process.exitCode = ok ? 0 : 1;
} finally {
  await server.stop();
  rmSync(root, { recursive: true, force: true });
}
