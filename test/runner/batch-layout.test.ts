/**
 * BatchLayout over a real (small, host-memory) KvSlots: each slot's positions follow it through
 * admission with prefix blocks, forks, beam copies and compaction, and after each plan rows
 * [0, runs) are exactly the plan's runs, decoding ones first.
 */
import { describe, expect, it } from "vitest";
import { PREFIX_BLOCK, PrefixCache } from "../../src/core/cache/prefix-cache.ts";
import { BatchLayout, type LayoutPlan, type PassRun } from "../../src/core/runner/batch-layout.ts";
import { KvSlots } from "../../src/core/runner/kv-slots.ts";

const shape = { layers: 1, kvHeads: 1, headDim: 2 };

function cache(): KvSlots {
  return new KvSlots(shape, { maxRows: 8, maxPositions: 64 });
}

/** The first element of each of a row's positions (K buffer of layer 0). */
function read(kv: KvSlots, row: number, length: number): number[] {
  const data = kv.bind(0, row + 1).feeds["past_key_values.0.key"]!.data as Float32Array;
  const span = kv.capacity * shape.headDim;
  return Array.from({ length }, (_, p) => data[row * span + p * shape.headDim]!);
}

/** What a pass does to a row: writes its tokens at positions [start, start + tokens). */
function pass(kv: KvSlots, row: number, run: PassRun): void {
  const data = kv.bind(0, row + 1).feeds["past_key_values.0.key"]!.data as Float32Array;
  const span = kv.capacity * shape.headDim;
  run.tokens.forEach((t, i) => {
    data[row * span + (run.start + i) * shape.headDim] = t;
  });
}

const plan = (p: Partial<LayoutPlan>): LayoutPlan => ({
  runs: [],
  admitted: [],
  forks: [],
  beamCopies: [],
  prefixSaves: [],
  ...p,
});

const decode = (slot: object, start: number, token: number): PassRun => ({
  slot,
  start,
  tokens: [token],
  logits: "last",
  prompt: false,
});

const prompt = (slot: object, start: number, tokens: number[]): PassRun => ({
  slot,
  start,
  tokens,
  logits: "last",
  prompt: true,
});

function step(kv: KvSlots, layout: BatchLayout, p: LayoutPlan): number[] {
  const rows = layout.apply(p);
  p.runs.forEach((run, i) => {
    pass(kv, rows[i]!, run);
  });
  layout.savePrefixes(p);
  return rows;
}

describe("BatchLayout", () => {
  it("forks a complete prompt to its choices and keeps every slot's positions through compaction", () => {
    const kv = cache();
    const layout = new BatchLayout(kv);
    const a = { name: "a" };
    const [a0, a1, a2] = [{ c: 0 }, { c: 1 }, { c: 2 }];
    expect(
      step(
        kv,
        layout,
        plan({ runs: [prompt(a, 0, [1, 2, 3])], admitted: [{ slot: a, positions: 3, blocks: [] }] }),
      ),
    ).toEqual([0]);
    // The prompt completes: its row passes to choice 0, choices 1 and 2 copy it; a new prompt b arrives.
    const b = { name: "b" };
    const rows = step(
      kv,
      layout,
      plan({
        forks: [{ from: a, to: [a0, a1, a2], length: 3 }],
        runs: [decode(a0, 3, 10), decode(a1, 3, 11), decode(a2, 3, 12), prompt(b, 0, [7, 7])],
        admitted: [{ slot: b, positions: 2, blocks: [] }],
      }),
    );
    expect(rows).toEqual([0, 1, 2, 3]);
    expect(read(kv, 0, 4)).toEqual([1, 2, 3, 10]);
    expect(read(kv, 1, 4)).toEqual([1, 2, 3, 11]);
    expect(read(kv, 2, 4)).toEqual([1, 2, 3, 12]);
    // Choice 0 leaves: the last decoding row (choice 2) fills its row, the prompt moves down.
    const after = step(kv, layout, plan({ runs: [decode(a1, 4, 21), decode(a2, 4, 22), prompt(b, 2, [8])] }));
    expect(after).toEqual([1, 0, 2]);
    expect(read(kv, 0, 5)).toEqual([1, 2, 3, 12, 22]);
    expect(read(kv, 1, 5)).toEqual([1, 2, 3, 11, 21]);
    expect(read(kv, 2, 3)).toEqual([7, 7, 8]);
  });

  it("copies beams from their parents, every parent read before any row is written", () => {
    const kv = cache();
    const layout = new BatchLayout(kv);
    const a = {};
    const [b0, b1] = [{ beam: 0 }, { beam: 1 }];
    step(
      kv,
      layout,
      plan({ runs: [prompt(a, 0, [1, 2])], admitted: [{ slot: a, positions: 2, blocks: [] }] }),
    );
    step(
      kv,
      layout,
      plan({ forks: [{ from: a, to: [b0, b1], length: 2 }], runs: [decode(b0, 2, 30), decode(b1, 2, 31)] }),
    );
    // The beams swap: each row takes the other's positions.
    step(
      kv,
      layout,
      plan({
        beamCopies: [
          { from: b1, to: b0, length: 3 },
          { from: b0, to: b1, length: 3 },
        ],
        runs: [decode(b0, 3, 40), decode(b1, 3, 41)],
      }),
    );
    expect(read(kv, 0, 4)).toEqual([1, 2, 31, 40]);
    expect(read(kv, 1, 4)).toEqual([1, 2, 30, 41]);
  });

  it("loads an admitted prompt's cached prefix blocks and saves a complete prompt's", () => {
    const kv = cache();
    const prefixCache = new PrefixCache(1 << 20);
    const layout = new BatchLayout(kv, prefixCache);
    const tokens = Array.from({ length: PREFIX_BLOCK + 1 }, (_, i) => 100 + i);
    const keys = PrefixCache.blockKeys(tokens);
    const a = {};
    step(
      kv,
      layout,
      plan({
        runs: [prompt(a, 0, tokens)],
        admitted: [{ slot: a, positions: tokens.length, blocks: [] }],
        prefixSaves: [{ slot: a, keys }],
      }),
    );
    expect(prefixCache.has(keys[0]!)).toBe(true);
    const b = {};
    const blocks = prefixCache.lookup(keys);
    const rows = step(
      kv,
      layout,
      plan({
        runs: [prompt(b, PREFIX_BLOCK, [tokens.at(-1)!])],
        admitted: [{ slot: b, positions: tokens.length, blocks }],
      }),
    );
    // a is not in the plan: it left, and b took row 0 with the block's positions.
    expect(rows).toEqual([0]);
    expect(read(kv, 0, tokens.length)).toEqual(tokens);
  });

  it("gives prompts admitted together rows in order, and closes the gap a middle prompt leaves", () => {
    const kv = cache();
    const layout = new BatchLayout(kv);
    const d = {};
    step(kv, layout, plan({ runs: [prompt(d, 0, [9])], admitted: [{ slot: d, positions: 1, blocks: [] }] }));
    const d0 = {};
    const [p, q, r] = [{ p: 0 }, { p: 1 }, { p: 2 }];
    const rows = step(
      kv,
      layout,
      plan({
        forks: [{ from: d, to: [d0], length: 1 }],
        runs: [decode(d0, 1, 10), prompt(p, 0, [1, 2]), prompt(q, 0, [3, 4, 5]), prompt(r, 0, [6])],
        admitted: [p, q, r].map((slot) => ({ slot, positions: 4, blocks: [] })),
      }),
    );
    expect(rows).toEqual([0, 1, 2, 3]);
    // q, the middle prompt, is aborted mid-prefill: r moves down beside p, its positions with it.
    const after = step(kv, layout, plan({ runs: [decode(d0, 2, 11), prompt(p, 2, [7]), prompt(r, 1, [8])] }));
    expect(after).toEqual([0, 1, 2]);
    expect(read(kv, 0, 3)).toEqual([9, 10, 11]);
    expect(read(kv, 1, 3)).toEqual([1, 2, 7]);
    expect(read(kv, 2, 2)).toEqual([6, 8]);
  });

  it("forks a prompt that completes before another prompt's row: choices first, the prompt after", () => {
    const kv = cache();
    const layout = new BatchLayout(kv);
    const [p, q] = [{ p: 0 }, { p: 1 }];
    step(
      kv,
      layout,
      plan({
        runs: [prompt(p, 0, [1, 2]), prompt(q, 0, [3])],
        admitted: [p, q].map((slot) => ({ slot, positions: 3, blocks: [] })),
      }),
    );
    const [p0, p1, p2] = [{ c: 0 }, { c: 1 }, { c: 2 }];
    const rows = step(
      kv,
      layout,
      plan({
        forks: [{ from: p, to: [p0, p1, p2], length: 2 }],
        runs: [decode(p0, 2, 20), decode(p1, 2, 21), decode(p2, 2, 22), prompt(q, 1, [4])],
      }),
    );
    // p2 was copied after q's row and traded rows with q (a cycle, moved through saved copies).
    expect(rows).toEqual([0, 2, 1, 3]);
    expect(read(kv, 0, 3)).toEqual([1, 2, 20]);
    expect(read(kv, 1, 3)).toEqual([1, 2, 22]);
    expect(read(kv, 2, 3)).toEqual([1, 2, 21]);
    expect(read(kv, 3, 2)).toEqual([3, 4]);
    // q completes too, from the last row, and p1 finishes: every remaining row keeps its positions.
    const [q0] = [{ c: "q" }];
    const last = step(
      kv,
      layout,
      plan({
        forks: [{ from: q, to: [q0], length: 2 }],
        runs: [decode(p0, 3, 30), decode(p2, 3, 32), decode(q0, 2, 40)],
      }),
    );
    expect(last).toEqual([0, 1, 2]);
    expect(read(kv, 0, 4)).toEqual([1, 2, 20, 30]);
    expect(read(kv, 1, 4)).toEqual([1, 2, 22, 32]);
    expect(read(kv, 2, 3)).toEqual([3, 4, 40]);
  });

  it("refuses a run whose slot holds no row", () => {
    const layout = new BatchLayout(cache());
    expect(() => layout.apply(plan({ runs: [decode({}, 0, 1)] }))).toThrow(/holds no KV row/);
  });
});
