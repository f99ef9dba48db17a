import { describe, expect, it } from "vitest";
import type { Storage } from "../../src/storage/storage.ts";
import { openStorage } from "../../src/storage/storage.ts";
import type { UsageRecord } from "../../src/storage/usage.ts";
import { useTempDb } from "./helpers.ts";

const tempDb = useTempDb();

function record(over: Partial<UsageRecord>): UsageRecord {
  return {
    time: new Date("2025-06-01T10:00:00Z"),
    model: "smollm2",
    promptTokens: 10,
    completionTokens: 5,
    cachedTokens: 0,
    latencyMs: 12.5,
    status: 200,
    ...over,
  };
}

function fill(s: Storage): { a: number; b: number } {
  const a = s.keys.createKey("a").id;
  const b = s.keys.createKey("b").id;
  const u = s.usage;
  u.recordUsage(record({ keyId: a, team: "t1", project: "p1", promptTokens: 100, completionTokens: 20 }));
  u.recordUsage(record({ keyId: a, team: "t1", project: "p1", cachedTokens: 8, status: 500 }));
  u.recordUsage(record({ keyId: b, team: "t1", project: "p2", model: "qwen", checkpoint: "step-100" }));
  u.recordUsage(
    record({
      keyId: b,
      model: "qwen",
      requestId: "req-1",
      status: 400,
      time: new Date("2025-06-03T00:00:00Z"),
    }),
  );
  u.recordUsage(record({ keyId: null, time: new Date("2025-06-02T00:00:00Z") }));
  return { a, b };
}

const totals = (requests: number, prompt: number, completion: number, cached: number, errors: number) => ({
  requests,
  promptTokens: prompt,
  completionTokens: completion,
  cachedTokens: cached,
  errors,
});

describe("usage records", () => {
  it("totals by project, key and model", () => {
    const s = openStorage(tempDb());
    const { a, b } = fill(s);
    expect(s.usage.usageTotals({ by: "project" })).toEqual([
      { group: null, ...totals(2, 20, 10, 0, 1) },
      { group: "t1/p1", ...totals(2, 110, 25, 8, 1) },
      { group: "t1/p2", ...totals(1, 10, 5, 0, 0) },
    ]);
    expect(s.usage.usageTotals({ by: "key" })).toEqual([
      { group: null, keyPrefix: null, keyName: null, ...totals(1, 10, 5, 0, 0) },
      {
        group: String(a),
        keyPrefix: expect.stringMatching(/^osk-/),
        keyName: "a",
        ...totals(2, 110, 25, 8, 1),
      },
      {
        group: String(b),
        keyPrefix: expect.stringMatching(/^osk-/),
        keyName: "b",
        ...totals(2, 20, 10, 0, 1),
      },
    ]);
    expect(s.usage.usageTotals({ by: "model" })).toEqual([
      { group: "qwen", ...totals(2, 20, 10, 0, 1) },
      { group: "smollm2", ...totals(3, 120, 30, 8, 1) },
    ]);
    s.close();
  });

  it("filters by start time, inclusive", () => {
    const s = openStorage(tempDb());
    fill(s);
    expect(s.usage.usageTotals({ by: "model", since: "2025-06-02" })).toEqual([
      { group: "qwen", ...totals(1, 10, 5, 0, 1) },
      { group: "smollm2", ...totals(1, 10, 5, 0, 0) },
    ]);
    expect(s.usage.usageTotals({ by: "model", since: new Date("2025-06-03T00:00:00Z") })).toHaveLength(1);
    expect(s.usage.usageTotals({ by: "project", since: "2030-01-01T00:00:00Z" })).toEqual([]);
    expect(() => s.usage.usageTotals({ by: "model", since: "last week" })).toThrow(RangeError);
    expect(() => s.usage.usageTotals({ by: "team" as never })).toThrow(/grouped by/);
    s.close();
  });

  it("persists across close and reopen", () => {
    const path = tempDb();
    const s = openStorage(path);
    fill(s);
    const before = (["project", "key", "model"] as const).map((by) => s.usage.usageTotals({ by }));
    s.close();
    const again = openStorage(path);
    const after = (["project", "key", "model"] as const).map((by) => again.usage.usageTotals({ by }));
    expect(after).toEqual(before);
    expect(after[0]!.reduce((n, r) => n + r.requests, 0)).toBe(5);
    again.close();
  });

  it("is visible to another connection as soon as recordUsage returns", () => {
    const path = tempDb();
    const server = openStorage(path);
    const reader = openStorage(path);
    server.usage.recordUsage(record({}));
    expect(reader.usage.usageTotals({ by: "model" })[0]?.requests).toBe(1);
    server.close();
    reader.close();
  });

  it("rejects impossible values instead of storing them", () => {
    const s = openStorage(tempDb());
    expect(() => s.usage.recordUsage(record({ promptTokens: -1 }))).toThrow(/promptTokens/);
    expect(() => s.usage.recordUsage(record({ completionTokens: 1.5 }))).toThrow(/completionTokens/);
    expect(() => s.usage.recordUsage(record({ latencyMs: Number.NaN }))).toThrow(/latencyMs/);
    expect(() => s.usage.recordUsage(record({ keyId: 12345 }))).toThrow(/FOREIGN KEY/);
    expect(() => s.usage.recordUsage(record({ team: "t", project: null }))).toThrow(/CHECK/);
    expect(s.usage.usageTotals({ by: "model" })).toEqual([]);
    s.close();
  });

  it("group commit: rows queued in one turn are committed together, each visible once its promise resolves", async () => {
    const path = tempDb();
    const server = openStorage(path);
    const reader = openStorage(path);
    const commits = Array.from({ length: 16 }, (_, i) =>
      server.usage.commitUsage(record({ promptTokens: i })),
    );
    // Nothing is written before the batch commits at the next turn of the event loop.
    expect(reader.usage.usageTotals({ by: "model" })).toEqual([]);
    await Promise.all(commits);
    const [totals] = reader.usage.usageTotals({ by: "model" });
    expect(totals?.requests).toBe(16);
    expect(totals?.promptTokens).toBe((15 * 16) / 2);
    server.close();
    reader.close();
  });

  it("group commit: a refused row fails alone, its batch-mates are stored", async () => {
    const s = openStorage(tempDb());
    const results = await Promise.allSettled([
      s.usage.commitUsage(record({ promptTokens: 1 })),
      s.usage.commitUsage(record({ keyId: 12345 })),
      s.usage.commitUsage(record({ promptTokens: -1 })),
      s.usage.commitUsage(record({ promptTokens: 2 })),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected", "fulfilled"]);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/FOREIGN KEY/);
    expect(String((results[2] as PromiseRejectedResult).reason)).toMatch(/promptTokens/);
    const [totals] = s.usage.usageTotals({ by: "model" });
    expect(totals).toMatchObject({ requests: 2, promptTokens: 3 });
    s.close();
  });
});
