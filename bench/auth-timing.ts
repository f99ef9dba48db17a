/**
 * Does a refused key's time depend on where it differs from a real one? Measures a key with a
 * wrong prefix against a key with a wrong suffix (each the real key with 4 characters changed), in
 * random order: the key check alone (`ApiKeys.verifyKey`, many calls) and whole 401 responses over
 * HTTP (a real server on a temporary database). Prints medians and their difference.
 *
 *   node bench/auth-timing.ts [--checks 200000] [--requests 2000]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createLogger } from "../src/observability/logger.ts";
import { SERVER_DEFAULTS, startServer } from "../src/server.ts";
import { median } from "./stats.ts";

const { values } = parseArgs({
  options: { checks: { type: "string", default: "200000" }, requests: { type: "string", default: "2000" } },
});
const checks = Number(values.checks);
const requests = Number(values.requests);

const root = mkdtempSync(join(tmpdir(), "ortserve-auth-timing-"));
let key = "";
const server = await startServer({
  ...SERVER_DEFAULTS,
  port: 0,
  modelsDir: root,
  dbPath: join(root, "ortserve.db"),
  logger: createLogger("error"),
  announceKey: (k) => {
    key = k;
  },
});

/** The real key with its first (after `osk-`) or last 4 characters replaced. */
const flip = (s: string) => [...s].map((c) => (c === "A" ? "B" : "A")).join("");
const kinds = {
  "wrong prefix": `osk-${flip(key.slice(4, 8))}${key.slice(8)}`,
  "wrong suffix": `${key.slice(0, -4)}${flip(key.slice(-4))}`,
} as const;
type Kind = keyof typeof kinds;
const names = Object.keys(kinds) as Kind[];

/** Runs `n` trials per kind in a random interleaving; returns each kind's times in ns. */
async function measure(
  n: number,
  trial: (k: string) => Promise<void> | void,
): Promise<Record<Kind, number[]>> {
  const order = names.flatMap((k) => Array<Kind>(n).fill(k));
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const out = { "wrong prefix": [] as number[], "wrong suffix": [] as number[] };
  for (const k of order) {
    const t0 = process.hrtime.bigint();
    await trial(kinds[k]);
    out[k].push(Number(process.hrtime.bigint() - t0));
  }
  return out;
}

function report(title: string, times: Record<Kind, number[]>, unit: "ns" | "µs"): void {
  const scale = unit === "ns" ? 1 : 1000;
  const m = names.map((k) => median(times[k]) / scale);
  console.log(`${title} (${times[names[0]!].length} each, medians)`);
  for (const [i, k] of names.entries()) console.log(`  ${k.padEnd(13)} ${m[i]!.toFixed(1)} ${unit}`);
  const diff = m[0]! - m[1]!;
  console.log(
    `  difference    ${diff.toFixed(1)} ${unit} (${((100 * diff) / m[1]!).toFixed(2)}% of the suffix median)`,
  );
}

try {
  const keys = server.storage.keys;
  for (const k of names) if (keys.verifyKey(kinds[k])) throw new Error(`${k} key was accepted`);
  await measure(Math.min(checks, 10_000), (k) => void keys.verifyKey(k)); // warm-up
  report("ApiKeys.verifyKey", await measure(checks, (k) => void keys.verifyKey(k)), "ns");

  const refused = async (k: string) => {
    const res = await fetch(`${server.url}/v1/models`, { headers: { Authorization: `Bearer ${k}` } });
    await res.arrayBuffer();
    if (res.status !== 401) throw new Error(`expected 401, got ${res.status}`);
  };
  await measure(200, refused); // warm-up
  report("GET /v1/models, 401", await measure(requests, refused), "µs");
} finally {
  await server.close();
  rmSync(root, { recursive: true, force: true });
}
