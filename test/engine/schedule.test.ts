/**
 * The scheduler's plans with the runner's real BatchLayout over a small host KvSlots and a real
 * PrefixCache (the pass itself writes each run's tokens into its row): several prompts start in
 * one step while rows are free and the step's prompt tokens (prefillChunk) last, in queue order;
 * a prompt aborted mid-prefill from between others leaves; prompts admitted together miss each
 * other's blocks, and a later one hits them. The prompts generate nothing (maxTokens 0, as a
 * scored prompt), so each leaves when its prompt is in the cache.
 */
import { describe, expect, it } from "vitest";
import { PREFIX_BLOCK, PrefixCache } from "../../src/core/cache/prefix-cache.ts";
import { BatchLayout } from "../../src/core/runner/batch-layout.ts";
import { KvSlots } from "../../src/core/runner/kv-slots.ts";
import type { ActiveRequest } from "../../src/core/step/active-request.ts";
import { type AdmissionContext, admit } from "../../src/core/step/admission.ts";
import type { StepPlan } from "../../src/core/step/plan.ts";
import { Scheduler } from "../../src/core/step/schedule.ts";
import type { EngineCoreConfig, EngineEvent, EngineRequest } from "../../src/core/types.ts";
import { engineConfig, request } from "./engine-helpers.ts";

const shape = { layers: 1, kvHeads: 1, headDim: 1 };

/** A scheduler and the layout the runner would apply its plans with. */
function engine(extra: Partial<EngineCoreConfig>, severalPrompts = true) {
  const config = engineConfig("unused", { prefillChunk: 16, maxNumSeqs: 8, ...extra });
  const prefixCache = new PrefixCache(1 << 20);
  const kv = new KvSlots(shape, { maxRows: config.maxNumSeqs, maxPositions: 256 });
  const layout = new BatchLayout(kv, prefixCache);
  const scheduler = new Scheduler(config, prefixCache, severalPrompts);
  const events = new Map<ActiveRequest, EngineEvent[]>();
  let arrivals = 0;
  // Admission reads the model and the tokenizer only to set choices up; these prompts have none.
  const ctx = { config } as AdmissionContext;
  const row = (r: number, length: number) => {
    const data = kv.bind(0, r + 1).feeds["past_key_values.0.key"]!.data as Float32Array;
    return Array.from(data.subarray(r * kv.capacity, r * kv.capacity + length));
  };
  return {
    scheduler,
    events,
    add(ids: number[], extra: Partial<EngineRequest> = {}): ActiveRequest {
      const log: EngineEvent[] = [];
      const a = admit(request(ids, { maxTokens: 0, ...extra }), (e) => log.push(e), arrivals++, ctx, {
        promptIds: ids,
        maxTokens: 0,
        bannedWords: [],
      });
      events.set(a, log);
      scheduler.add(a);
      return a;
    },
    /** schedule → layout → a pass that writes each run's tokens → the update stage's prompt part. */
    step(): StepPlan {
      const plan = scheduler.schedule();
      const rows = layout.apply(plan);
      const data = kv.bind(0, Math.max(0, ...rows) + 1).feeds["past_key_values.0.key"]!.data as Float32Array;
      plan.runs.forEach((run, i) => {
        // Each run's positions must already hold its prompt's earlier tokens (computed or loaded).
        expect(row(rows[i]!, run.start)).toEqual(run.request.promptIds.slice(0, run.start));
        run.tokens.forEach((t, j) => {
          data[rows[i]! * kv.capacity + run.start + j] = t;
        });
      });
      layout.savePrefixes(plan);
      for (const run of plan.runs) run.request.computed += run.tokens.length;
      for (const run of plan.runs) if (run.completesPrompt) scheduler.promptDone(run.request);
      return plan;
    },
  };
}

const ids = (length: number, from: number) => Array.from({ length }, (_, i) => from + i);
const chunks = (plan: StepPlan) => plan.runs.map((r) => [r.request.promptIds[0], r.start, r.tokens.length]);

describe("Scheduler: several prompts per step", () => {
  it("admits waiting prompts in queue order while the step's prompt tokens last", () => {
    const e = engine({ prefillChunk: 16 });
    const [a, b, c, d] = [e.add(ids(5, 100)), e.add(ids(7, 200)), e.add(ids(10, 300)), e.add(ids(3, 400))];
    const first = e.step();
    // a and b whole, c the 4 tokens left; d waits.
    expect(first.admitted.map((x) => x.slot)).toEqual([a, b, c]);
    expect(chunks(first)).toEqual([
      [100, 0, 5],
      [200, 0, 7],
      [300, 0, 4],
    ]);
    expect(first.runs.map((r) => r.completesPrompt)).toEqual([true, true, false]);
    expect(e.scheduler.waitingCount).toBe(1);
    // c, mid-prefill, takes its share first; d starts beside it.
    const second = e.step();
    expect(second.admitted.map((x) => x.slot)).toEqual([d]);
    expect(chunks(second)).toEqual([
      [300, 4, 6],
      [400, 0, 3],
    ]);
    expect(e.scheduler.hasWork()).toBe(false);
    for (const x of [a, b, c, d]) expect(e.events.get(x)!.at(-1)).toMatchObject({ type: "done" });
  });

  it("gives a long prompt the whole budget: nothing starts beside it until its last chunk", () => {
    const e = engine({ prefillChunk: 8 });
    e.add(ids(20, 100));
    e.add(ids(2, 200));
    expect(chunks(e.step())).toEqual([[100, 0, 8]]);
    expect(chunks(e.step())).toEqual([[100, 8, 8]]);
    expect(chunks(e.step())).toEqual([
      [100, 16, 4],
      [200, 0, 2],
    ]);
  });

  it("admits no prompt whose choices would not have rows once the prompts mid-prefill fork", () => {
    const e = engine({ prefillChunk: 64, maxNumSeqs: 3 });
    const [a, b] = [e.add(ids(4, 100), { n: 2 }), e.add(ids(4, 200), { n: 2 })];
    expect(e.step().admitted.map((x) => x.slot)).toEqual([a]);
    expect(e.step().admitted.map((x) => x.slot)).toEqual([b]);
  });

  it("starts one prompt at a time where the runner cannot batch prompts", () => {
    const e = engine({ prefillChunk: 16 }, false);
    e.add(ids(5, 100));
    e.add(ids(7, 200));
    expect(chunks(e.step())).toEqual([[100, 0, 5]]);
    expect(chunks(e.step())).toEqual([[200, 0, 7]]);
  });

  it("drops a prompt aborted mid-prefill beside prompts that complete; the next starts in its place", () => {
    const e = engine({ prefillChunk: 12 });
    const [a, b, c] = [e.add(ids(4, 100)), e.add(ids(4, 200)), e.add(ids(30, 300))];
    const d = e.add(ids(20, 400));
    expect(chunks(e.step())).toEqual([
      [100, 0, 4],
      [200, 0, 4],
      [300, 0, 4],
    ]);
    // c is mid-prefill in the row after a's and b's; it is aborted, and d takes the whole budget.
    c.aborted = true;
    const next = e.step();
    expect(next.admitted.map((x) => x.slot)).toEqual([d]);
    expect(chunks(next)).toEqual([[400, 0, 12]]);
    expect([c.state, c.computed]).toEqual(["finished", 4]);
    expect(e.events.get(c)!.at(-1)).toEqual({ type: "done" });
    expect(chunks(e.step())).toEqual([[400, 12, 8]]);
    expect(e.scheduler.hasWork()).toBe(false);
    expect([a, b, d].map((x) => x.state)).toEqual(["finished", "finished", "finished"]);
  });

  it("lets prompts admitted together miss each other's blocks; a later prompt hits them", () => {
    const e = engine({ prefillChunk: 80 });
    const shared = ids(2 * PREFIX_BLOCK, 500);
    const [a, b] = [e.add([...shared, 1]), e.add([...shared, 2])];
    const first = e.step();
    expect(first.admitted.map((x) => x.slot)).toEqual([a, b]);
    // Both looked the cache up before either saved: b computes the prefix a is about to save.
    expect([a.cachedTokens, b.cachedTokens]).toEqual([0, 0]);
    expect(first.prefixSaves.map((s) => s.slot)).toEqual([a, b]);
    const c = e.add([...shared, 3]);
    const second = e.step();
    expect(second.admitted[0]!.blocks).toHaveLength(2);
    expect(c.cachedTokens).toBe(2 * PREFIX_BLOCK);
    // The step's check (each run's row holds its prompt's earlier tokens) covered the loaded blocks.
    expect(chunks(second)).toEqual([[500, 2 * PREFIX_BLOCK, 1]]);
  });
});
