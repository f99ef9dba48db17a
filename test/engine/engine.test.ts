import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeSessions } from "../../src/core/runner/native-session.ts";
import { BeamSearch } from "../../src/core/sample/beam-search.ts";
import type { EngineCoreConfig } from "../../src/core/types.ts";
import { EnginePool } from "../../src/workers/pool.ts";
import { argmax, emptyPast, loadRaw, step } from "../convert/run-onnx.ts";
import { buildSyntheticModel, SYNTHETIC } from "../fixtures/synthetic-model.ts";
import { collect, engineConfig, request, sampling } from "./engine-helpers.ts";

const prompts = [
  [1, 40, 80, 120, 3, 200, 17],
  [5, 99, 150, 42, 7, 8, 9, 10, 11, 12, 13, 14, 15],
  [260, 261],
  [30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50],
];

describe("engine (worker pool, continuous batching) on the synthetic model", () => {
  let root: string;
  let modelDir: string;
  let pool: EnginePool;
  let config: EngineCoreConfig;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "ortserve-engine-"));
    ({ modelDir } = await buildSyntheticModel(root, ["fp32"]));
    pool = new EnginePool({ workers: 1, maxRequestsPerWorker: 64 });
    config = engineConfig(modelDir);
  });

  afterAll(async () => {
    await pool?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("greedy output is the same batched and alone, and matches a plain forward loop", async () => {
    const alone = [];
    for (const p of prompts) alone.push((await collect(pool, config, request(p))).choices[0]!.tokens);
    const together = await Promise.all(prompts.map((p) => collect(pool, config, request(p))));
    expect(together.map((r) => r.choices[0]!.tokens)).toEqual(alone);

    const raw = await loadRaw(join(modelDir, "onnx/model.onnx"), SYNTHETIC.layers, SYNTHETIC.kvHeads, 16);
    let past = emptyPast(raw);
    let ids = prompts[0]!;
    let len = 0;
    const direct: number[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await step(raw, ids, past, len, 1);
      len += ids.length;
      past = r.past;
      direct.push(argmax(r.logits));
      ids = [direct.at(-1)!];
    }
    await raw.session.release();
    expect(alone[0]).toEqual(direct);
  });

  it("a row finishing in the step a prompt is prefilled leaves that prompt's cache row intact", async () => {
    // Step 1 prefills the first prompt; step 2 decodes its last token (the row leaves, the prompt
    // row after it moves down) and prefills the second: its chunk must land in the moved row.
    // Salted apart: a prefix-cache hit would load the second prompt's first blocks for it.
    const [first, second] = [prompts[0]!, prompts[3]!];
    const alone = (await collect(pool, config, request(second, { cacheSalt: "alone" }))).choices[0]!.tokens;
    const [, together] = await Promise.all([
      collect(pool, config, request(first, { maxTokens: 2 })),
      collect(pool, config, request(second, { cacheSalt: "together" })),
    ]);
    expect(together.choices[0]!.tokens).toEqual(alone);
    // With ortserve's attention kernel that step was one forward pass (decode row and chunk).
    const mixed = Object.values(await pool.stats()).reduce(
      (n: number, s) => n + ((s as { mixedSteps?: number }).mixedSteps ?? 0),
      0,
    );
    if (nativeSessions) expect(mixed).toBeGreaterThan(0);
  });

  it("gives each of many staggered requests its solo tokens (rows joining, leaving and moving)", async () => {
    // Prompts of 2 to 40 tokens (chunks of 8), 1 to 12 new tokens, n of 1 or 2, arriving a few ms
    // apart into 8 rows: prompts are admitted while others decode, rows finish at every step and
    // the last row moves into their place, with and without prefix-cache hits (a third share a
    // salt within each phase).
    const specs = Array.from({ length: 20 }, (_, i) => ({
      ids: Array.from({ length: 2 + ((i * 13) % 39) }, (_, t) => 3 + ((i * 31 + t * 17) % 250)),
      maxTokens: 1 + ((i * 5) % 12),
      n: i % 4 === 3 ? 2 : 1,
      salt: i % 3 === 0 ? "shared" : `own-${i}`,
    }));
    const run = (x: (typeof specs)[number], phase: string) =>
      collect(
        pool,
        config,
        request(x.ids, { maxTokens: x.maxTokens, n: x.n, cacheSalt: `${phase}-${x.salt}` }),
      );
    const tokens = (r: Awaited<ReturnType<typeof run>>) => r.choices.map((c) => c.tokens);
    const alone = [];
    for (const x of specs) alone.push(tokens(await run(x, "alone")));
    const staggered = await Promise.all(
      specs.map(async (x, i) => {
        await new Promise((r) => setTimeout(r, i % 2));
        return tokens(await run(x, "staggered"));
      }),
    );
    expect(staggered).toEqual(alone);
  });

  it("a seeded request gives the same tokens whatever else is in the batch; choice i uses seed + i", async () => {
    const seeded = request(prompts[1]!, { n: 2, sampling: sampling({ temperature: 1, seed: 1234n }) });
    const alone = await collect(pool, config, seeded);
    const [busy] = await Promise.all([
      collect(pool, config, seeded),
      collect(pool, config, request(prompts[0]!, { sampling: sampling({ temperature: 0.7, seed: 9n }) })),
      collect(pool, config, request(prompts[2]!, { sampling: sampling({ temperature: 1.3 }) })),
    ]);
    expect(busy.choices.map((c) => c.tokens)).toEqual(alone.choices.map((c) => c.tokens));
    const second = await collect(
      pool,
      config,
      request(prompts[1]!, { sampling: sampling({ temperature: 1, seed: 1235n }) }),
    );
    expect(second.choices[0]!.tokens).toEqual(alone.choices[1]!.tokens);
    expect(alone.choices[0]!.tokens).not.toEqual(alone.choices[1]!.tokens);
  });

  it("top_k=1 equals greedy; logit_bias +100 forces a token; allowed_token_ids are respected", async () => {
    const greedy = await collect(pool, config, request(prompts[0]!));
    const topK1 = await collect(
      pool,
      config,
      request(prompts[0]!, { sampling: sampling({ temperature: 1, topK: 1, seed: 3n }) }),
    );
    expect(topK1.choices[0]!.tokens).toEqual(greedy.choices[0]!.tokens);
    const forced = await collect(
      pool,
      config,
      request(prompts[0]!, { sampling: sampling({ logitBias: { ids: [77], biases: [100] } }) }),
    );
    expect(new Set(forced.choices[0]!.tokens)).toEqual(new Set([77]));
    const allowed = [10, 20, 30];
    const limited = await collect(
      pool,
      config,
      request(prompts[0]!, { sampling: sampling({ temperature: 1, seed: 5n, allowedTokenIds: allowed }) }),
    );
    for (const t of limited.choices[0]!.tokens) expect(allowed).toContain(t);
  });

  it("min_tokens holds EOS back; stop_token_ids stop with the id as stop_reason", async () => {
    const eos = 2;
    const r = await collect(
      pool,
      config,
      request(prompts[0]!, {
        sampling: sampling({ ignoreEos: false, minTokens: 5, logitBias: { ids: [eos], biases: [100] } }),
      }),
    );
    expect(r.choices[0]!.tokens).toHaveLength(6);
    expect(r.choices[0]!.tokens.slice(0, 5)).not.toContain(eos);
    expect(r.choices[0]!.finishReason).toBe("stop");
    expect(r.choices[0]!.stopReason).toBeNull();

    const greedy = (await collect(pool, config, request(prompts[1]!))).choices[0]!.tokens;
    const stopId = greedy[3]!;
    const stopped = await collect(
      pool,
      config,
      request(prompts[1]!, { sampling: sampling({ stopTokenIds: [stopId] }) }),
    );
    const c = stopped.choices[0]!;
    expect(c.tokens).toEqual(greedy.slice(0, greedy.indexOf(stopId) + 1));
    expect(c.finishReason).toBe("stop");
    expect(c.stopReason).toBe(stopId);
  });

  it("stop strings cut the text exactly, with and without include_stop_str_in_output", async () => {
    const full = (await collect(pool, config, request(prompts[3]!, { maxTokens: 30 }))).choices[0]!.text;
    expect(full.length).toBeGreaterThan(6);
    const stop = full.slice(3, 5);
    const at = full.indexOf(stop);
    const cut = await collect(pool, config, request(prompts[3]!, { maxTokens: 30, stop: [stop] }));
    expect(cut.choices[0]!.text).toBe(full.slice(0, at));
    expect(cut.choices[0]!.stopReason).toBe(stop);
    const kept = await collect(
      pool,
      config,
      request(prompts[3]!, { maxTokens: 30, stop: [stop], includeStopStrInOutput: true }),
    );
    expect(kept.choices[0]!.text).toBe(full.slice(0, at + stop.length));
  });

  it("repetition detection ends a forced loop", async () => {
    const r = await collect(
      pool,
      config,
      request(prompts[0]!, {
        maxTokens: 50,
        sampling: sampling({ logitBias: { ids: [55], biases: [100] } }),
        repetitionDetection: { minPatternSize: 1, maxPatternSize: 4, minCount: 3 },
      }),
    );
    expect(r.choices[0]!.tokens).toEqual([55, 55, 55]);
    expect(r.choices[0]!.finishReason).toBe("repetition");
    expect(r.choices[0]!.stopReason).toBe("repetition_detected");
  });

  it("logprobs equal a direct log-softmax of the model's logits", async () => {
    const r = await collect(pool, config, request(prompts[2]!, { maxTokens: 1, logprobs: 3 }));
    const raw = await loadRaw(join(modelDir, "onnx/model.onnx"), SYNTHETIC.layers, SYNTHETIC.kvHeads, 16);
    const { logits } = await step(raw, prompts[2]!, emptyPast(raw), 0, 1);
    await raw.session.release();
    const max = Math.max(...logits);
    const lse = max + Math.log(logits.reduce((s, v) => s + Math.exp(v - max), 0));
    const token = r.choices[0]!.tokens[0]!;
    expect(r.choices[0]!.logprobs[0]).toBeCloseTo(logits[token]! - lse, 4);
  });

  it("beam search keeps the best beams and forks their KV rows correctly", async () => {
    const width = 3;
    const maxTokens = 5;
    const prompt = prompts[0]!;
    const r = await collect(
      pool,
      config,
      request(prompt, { n: width, maxTokens, useBeamSearch: true, lengthPenalty: 0.8 }),
    );
    // Reference: the same search with every beam recomputed from scratch (no shared KV).
    const raw = await loadRaw(join(modelDir, "onnx/model.onnx"), SYNTHETIC.layers, SYNTHETIC.kvHeads, 16);
    const search = new BeamSearch(prompt.length, {
      beamWidth: width,
      maxTokens,
      eosTokenId: 2,
      lengthPenalty: 0.8,
      ignoreEos: true,
    });
    while (!search.done) {
      const candidates = [];
      for (const beam of search.live) {
        const { logits } = await step(raw, [...prompt, ...beam.tokenIds], emptyPast(raw), 0, 1);
        const max = Math.max(...logits);
        const lse = max + Math.log(logits.reduce((a, v) => a + Math.exp(v - max), 0));
        const order = Array.from(logits.keys()).sort((a, b) => logits[b]! - logits[a]! || a - b);
        candidates.push(order.slice(0, 2 * width).map((id) => ({ tokenId: id, logprob: logits[id]! - lse })));
      }
      search.step(candidates);
    }
    await raw.session.release();
    expect(r.choices.map((c) => c.tokens)).toEqual(search.results().map((b) => [...b.tokenIds]));
    expect(r.choices.every((c) => c.finishReason === "length")).toBe(true);
  });

  it("a prefix-cache hit reports cached tokens and gives the same output as a miss", async () => {
    const long = Array.from({ length: 60 }, (_, i) => 3 + ((i * 37) % 250));
    const miss = await collect(pool, config, request(long, { cacheSalt: "a" }));
    const hit = await collect(pool, config, request(long, { cacheSalt: "a" }));
    const otherSalt = await collect(pool, config, request(long, { cacheSalt: "b" }));
    expect(miss.cachedTokens).toBe(0);
    expect(hit.cachedTokens).toBeGreaterThanOrEqual(32);
    expect(otherSalt.cachedTokens).toBe(0);
    expect(hit.choices[0]!.tokens).toEqual(miss.choices[0]!.tokens);
  });

  it("rejects a prompt that does not fit, naming the numbers, and priority on an fcfs model", async () => {
    const tooLong = await collect(pool, config, request(prompts[0]!, { maxTokens: 300 }));
    expect(tooLong.error?.code).toBe("invalid_request");
    expect(tooLong.error?.message).toContain("maximum context length is 256 tokens");
    expect(tooLong.error?.message).toContain(`${prompts[0]!.length} in the messages, 300 in the completion`);
    const prio = await collect(pool, config, request(prompts[0]!, { priority: 3 }));
    expect(prio.error?.code).toBe("priority_not_supported");
  });

  it("admits by priority under load (lower first, ties by arrival)", async () => {
    const one = engineConfig(modelDir, { maxNumSeqs: 1, schedulingPolicy: "priority" });
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    // The long request holds the only row until every other one is waiting in the engine; then it
    // is aborted, and the queue is admitted in priority order.
    const hold = new AbortController();
    const busy = collect(
      pool,
      one,
      request(prompts[0]!, { maxTokens: 240 }),
      (e) => {
        if (e.type === "delta") started();
      },
      hold.signal,
    );
    await running;
    // Admission order is read from each request's time in the engine's queue: the four entered it
    // within a step of each other and each then runs 8 steps alone. (The order their last events
    // reach this thread is not the engine's: two ports' pending messages arrive in port order.)
    const queued = [5, 1, 3, 1].map((priority, i) =>
      collect(pool, one, request(prompts[1]!, { priority, maxTokens: 8 })).then((r) => {
        const prompt = r.events.find((e) => e.type === "prompt");
        return { label: `${priority}/${i}`, queueMs: prompt?.type === "prompt" ? prompt.queueMs : -1 };
      }),
    );
    const waiting = async () =>
      Object.values(await pool.stats()).reduce(
        (n: number, s) => n + ((s as { waiting?: number }).waiting ?? 0),
        0,
      );
    while ((await waiting()) < 4) await new Promise((r) => setTimeout(r, 5));
    hold.abort();
    const [, ...admitted] = await Promise.all([busy, ...queued]);
    admitted.sort((a, b) => a.queueMs - b.queueMs);
    expect(admitted.map((a) => a.label)).toEqual(["1/1", "1/3", "3/2", "5/0"]);
  });

  it("fair share: a key's one request sent after another key's 64 is admitted within one admission", async () => {
    // Its own pool: 66 tasks in flight at once.
    const wide = new EnginePool({ workers: 1, maxRequestsPerWorker: 128 });
    try {
      const order = async (fairShare: boolean) => {
        const one = engineConfig(modelDir, { maxNumSeqs: 1, fairShare });
        let started!: () => void;
        const running = new Promise<void>((r) => {
          started = r;
        });
        const hold = new AbortController();
        const busy = collect(
          wide,
          one,
          request(prompts[0]!, { maxTokens: 240 }),
          (e) => {
            if (e.type === "delta") started();
          },
          hold.signal,
        );
        await running;
        // Admission order is the order prompt events arrive: each request then runs 6 steps alone,
        // so no two are admitted close enough for their ports' messages to cross.
        const admitted: string[] = [];
        const send = (shareKey: string, label: string) =>
          collect(wide, one, request(prompts[1]!, { maxTokens: 6, shareKey }), (e) => {
            if (e.type === "prompt") admitted.push(label);
          });
        const flood = Array.from({ length: 64 }, (_, i) => send("key-a", `a${i}`));
        // Sent once the flood is queued, so it is the last to arrive.
        const waiting = async () =>
          Object.values(await wide.stats()).reduce(
            (n: number, s) => n + ((s as { waiting?: number }).waiting ?? 0),
            0,
          );
        while ((await waiting()) < 64) await new Promise((r) => setTimeout(r, 5));
        const other = send("key-b", "b");
        while ((await waiting()) < 65) await new Promise((r) => setTimeout(r, 5));
        hold.abort();
        await Promise.all([busy, ...flood, other]);
        return admitted;
      };
      const fair = await order(true);
      expect(fair.indexOf("b")).toBeLessThanOrEqual(1);
      // Without fair share the same arrivals are admitted in arrival order: the other key's last.
      const fcfs = await order(false);
      expect(fcfs.indexOf("b")).toBe(64);
    } finally {
      await wide.close();
    }
  }, 120_000);

  it("an aborted request frees its slot", async () => {
    const one = engineConfig(modelDir, { maxNumSeqs: 1 });
    const controller = new AbortController();
    const long = collect(
      pool,
      one,
      request(prompts[0]!, { maxTokens: 200 }),
      (e) => {
        if (e.type === "delta") controller.abort();
      },
      controller.signal,
    );
    const next = collect(pool, one, request(prompts[1]!, { maxTokens: 3 }));
    const [aborted, done] = await Promise.all([long, next]);
    expect(aborted.choices[0]!.tokens.length).toBeLessThan(200);
    expect(done.choices[0]!.tokens).toHaveLength(3);
  });
});

describe.skipIf(!nativeSessions)("engine with an int8 KV cache (--kv-cache-dtype int8)", () => {
  let root: string;
  let pool: EnginePool;
  let config: EngineCoreConfig;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "ortserve-engine-int8-"));
    const { modelDir } = await buildSyntheticModel(root, ["fp32"]);
    pool = new EnginePool({ workers: 1, maxRequestsPerWorker: 64 });
    config = engineConfig(modelDir, { kvCacheDtype: "int8" });
  });

  afterAll(async () => {
    await pool?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("gives a row the same tokens batched and alone, and a prefix-cache hit the same as a miss", async () => {
    const alone = [];
    for (const p of prompts) alone.push((await collect(pool, config, request(p))).choices[0]!.tokens);
    const together = await Promise.all(prompts.map((p) => collect(pool, config, request(p))));
    expect(together.map((r) => r.choices[0]!.tokens)).toEqual(alone);

    const long = Array.from({ length: 60 }, (_, i) => 3 + ((i * 37) % 250));
    const miss = await collect(pool, config, request(long, { cacheSalt: "a" }));
    const hit = await collect(pool, config, request(long, { cacheSalt: "a" }));
    expect(hit.cachedTokens).toBeGreaterThanOrEqual(32);
    expect(hit.choices[0]!.tokens).toEqual(miss.choices[0]!.tokens);
  });
});

describe("engine worker failure", () => {
  it("a worker killed mid-request fails that request clearly and the pool recovers", async () => {
    const root = mkdtempSync(join(tmpdir(), "ortserve-crash-"));
    const { modelDir } = await buildSyntheticModel(root, ["fp32"]);
    const pool = new EnginePool({ workers: 1, maxRequestsPerWorker: 8 });
    const config = engineConfig(modelDir);
    try {
      await collect(pool, config, request(prompts[0]!, { maxTokens: 2 }));
      let crash: Promise<unknown> | undefined;
      // Kill the worker as soon as the request is generating.
      const running = collect(
        pool,
        config,
        request(prompts[0]!, { maxTokens: 250 - prompts[0]!.length }),
        (e) => {
          if (e.type === "delta" && !crash) crash = pool.crashOneWorker().catch(() => undefined);
        },
      );
      const failed = await running;
      expect(failed.error?.code).toBe("engine_failure");
      const after = await collect(pool, config, request(prompts[1]!, { maxTokens: 3 }));
      expect(after.error).toBeUndefined();
      expect(after.choices[0]!.tokens).toHaveLength(3);
    } finally {
      await pool.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
