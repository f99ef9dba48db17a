import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PREFIX_BLOCK } from "../../src/core/cache/prefix-cache.ts";
import type { EngineCoreConfig, EngineEvent } from "../../src/core/types.ts";
import { EnginePool } from "../../src/workers/pool.ts";
import { buildSyntheticModel } from "../fixtures/synthetic-model.ts";
import { collect, engineConfig, request } from "./engine-helpers.ts";

const prompts = [
  [1, 40, 80, 120, 3, 200, 17],
  [5, 99, 150, 42, 7, 8, 9, 10, 11, 12, 13, 14, 15],
  [260, 261],
];
/** Prompt + completion just under the synthetic configs' 256-token context. */
const LONG = 240;

/** Indices of the workers whose engines include the model `key`. */
function holders(perWorker: Record<string, unknown>[], key: string): number[] {
  return perWorker.flatMap((engines, i) => (key in engines ? [i] : []));
}

/** Resolves on the stream's first generated token. */
function firstDelta(): { seen: Promise<void>; onEvent: (e: EngineEvent) => void } {
  let resolve!: () => void;
  const seen = new Promise<void>((r) => {
    resolve = r;
  });
  return { seen, onEvent: (e) => (e.type === "delta" ? resolve() : undefined) };
}

interface Stats {
  waiting: number;
  running: number;
  kvBytes: number;
  kvUsedBytes: number;
  worker: number;
}

describe("engine pool with 2 workers: each model is owned by one worker", () => {
  let root: string;
  let pool: EnginePool;
  // One model directory, three engine configurations: three engines, as far as the pool knows.
  let a: EngineCoreConfig;
  let b: EngineCoreConfig;
  let c: EngineCoreConfig;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "ortserve-routing-"));
    const { modelDir } = await buildSyntheticModel(root, ["fp32"]);
    pool = new EnginePool({ workers: 2, maxRequestsPerWorker: 16 });
    a = engineConfig(modelDir, { maxNumSeqs: 4 });
    b = engineConfig(modelDir, { maxNumSeqs: 6 });
    c = engineConfig(modelDir, { maxNumSeqs: 5 });
  });

  afterAll(async () => {
    await pool?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("all of a model's requests run in one worker, and two models in different workers", async () => {
    expect(pool.threads).toBe(2);
    expect(pool.workerOf(a)).toBeUndefined();
    // Concurrent requests, a model's in a row: a pool handing each task to the next or the least busy
    // thread would load both models in both workers.
    const runs = [];
    for (const config of [a, b])
      for (let i = 0; i < 6; i++)
        runs.push(collect(pool, config, request(prompts[i % 3]!, { maxTokens: 8 })));
    for (const r of await Promise.all(runs)) {
      expect(r.error).toBeUndefined();
      expect(r.choices[0]!.tokens).toHaveLength(8);
    }
    expect(pool.workerOf(a)).toBe(0);
    expect(pool.workerOf(b)).toBe(1);
    const perWorker = await pool.workerStats();
    expect(perWorker).toHaveLength(2);
    expect(holders(perWorker, JSON.stringify(a))).toEqual([0]);
    expect(holders(perWorker, JSON.stringify(b))).toEqual([1]);

    // A third model: both workers own one, so the tie goes to the lower index.
    const r = await collect(pool, c, request(prompts[0]!, { maxTokens: 3 }));
    expect(r.error).toBeUndefined();
    expect(pool.workerOf(c)).toBe(0);
    const after = await pool.workerStats();
    expect(holders(after, JSON.stringify(c))).toEqual([0]);
    expect(Object.keys(after[0]!).sort()).toEqual([JSON.stringify(a), JSON.stringify(c)].sort());
    expect(Object.keys(after[1]!)).toEqual([JSON.stringify(b)]);
  });

  it("stats merge every worker's engines: a running request shows whichever worker holds its model", async () => {
    const ca = new AbortController();
    const cb = new AbortController();
    const fa = firstDelta();
    const fb = firstDelta();
    const runA = collect(pool, a, request(prompts[0]!, { maxTokens: LONG }), fa.onEvent, ca.signal);
    const runB = collect(pool, b, request(prompts[1]!, { maxTokens: LONG }), fb.onEvent, cb.signal);
    await Promise.all([fa.seen, fb.seen]);
    const stats = (await pool.stats()) as Record<string, Stats>;
    ca.abort();
    cb.abort();
    const [ra, rb] = await Promise.all([runA, runB]);
    // Both were still generating when the stats were taken.
    expect(ra.choices[0]!.tokens.length).toBeLessThan(LONG);
    expect(rb.choices[0]!.tokens.length).toBeLessThan(LONG);

    expect(Object.keys(stats).sort()).toEqual([a, b, c].map((x) => JSON.stringify(x)).sort());
    const sa = stats[JSON.stringify(a)]!;
    const sb = stats[JSON.stringify(b)]!;
    const sc = stats[JSON.stringify(c)]!;
    expect([sa.worker, sb.worker, sc.worker]).toEqual([0, 1, 0]);
    expect([sa.running, sb.running, sc.running]).toEqual([1, 1, 0]);
    expect(sa.kvUsedBytes).toBeGreaterThan(0);
    expect(sb.kvUsedBytes).toBeGreaterThan(0);
    expect(sc.kvUsedBytes).toBe(0);
    for (const s of [sa, sb, sc]) {
      expect(s.waiting).toBe(0);
      expect(s.kvBytes).toBeGreaterThan(0);
    }
  });

  it("a repeated prompt hits the prefix cache even while its model's worker is busy", async () => {
    const long = Array.from({ length: 60 }, (_, i) => 3 + ((i * 37) % 250));
    const repeat = () => collect(pool, a, request(long, { cacheSalt: "routing", maxTokens: 4 }));
    const miss = await repeat();
    // Back to back (a round-robin pool would alternate workers), then while the model's worker is busy
    // with another request (a pool picking the least busy thread would send the repeat elsewhere).
    const idle = await repeat();
    const controller = new AbortController();
    const started = firstDelta();
    const busy = collect(
      pool,
      a,
      request(prompts[1]!, { maxTokens: LONG }),
      started.onEvent,
      controller.signal,
    );
    await started.seen;
    const loaded = await repeat();
    controller.abort();
    await busy;
    expect(miss.error).toBeUndefined();
    expect(miss.cachedTokens).toBe(0);
    for (const hit of [idle, loaded]) {
      expect(hit.error).toBeUndefined();
      expect(hit.cachedTokens).toBeGreaterThanOrEqual(2 * PREFIX_BLOCK);
      expect(hit.choices[0]!.tokens).toEqual(miss.choices[0]!.tokens);
    }
  });

  it("a crashed worker fails only its own requests; its models work again on the next request", async () => {
    const wa = pool.workerOf(a)!;
    const wb = pool.workerOf(b)!;
    expect(wa).not.toBe(wb);
    const fa = firstDelta();
    const fb = firstDelta();
    let bEnded = false;
    const runA = collect(pool, a, request(prompts[0]!, { maxTokens: LONG }), fa.onEvent);
    // Four choices: the other worker's request runs long enough to be in flight across the crash.
    const runB = collect(pool, b, request(prompts[1]!, { maxTokens: LONG, n: 4 }), fb.onEvent).finally(() => {
      bEnded = true;
    });
    await Promise.all([fa.seen, fb.seen]);
    const crash = pool.crashOneWorker(wa).catch((err: Error) => err);
    const failed = await runA;
    expect(failed.error?.code).toBe("engine_failure");
    expect(failed.choices[0]!.tokens.length).toBeLessThan(LONG);
    expect(await crash).toBeInstanceOf(Error);
    // The other worker's request was in flight across the crash and finishes untouched.
    expect(bEnded).toBe(false);
    const survived = await runB;
    expect(survived.error).toBeUndefined();
    expect(survived.choices.map((ch) => ch.tokens.length)).toEqual([LONG, LONG, LONG, LONG]);

    // The crashed worker's models load again in its restarted thread, which still owns them.
    for (const config of [a, c]) {
      const r = await collect(pool, config, request(prompts[2]!, { maxTokens: 3 }));
      expect(r.error).toBeUndefined();
      expect(r.choices[0]!.tokens).toHaveLength(3);
      expect(pool.workerOf(config)).toBe(wa);
    }
    const perWorker = await pool.workerStats();
    expect(holders(perWorker, JSON.stringify(a))).toEqual([wa]);
    expect(holders(perWorker, JSON.stringify(b))).toEqual([wb]);
    expect(holders(perWorker, JSON.stringify(c))).toEqual([wa]);
    expect(pool.threads).toBe(2);
  });
});
