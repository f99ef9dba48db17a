/**
 * Stored responses: per-key visibility, deletion, and the retention's expiry and purge, with the
 * writes on the store's own connection and through the server's writer thread.
 */
import { describe, expect, it } from "vitest";
import { ApiKeys } from "../../src/storage/api-keys.ts";
import { openDatabase } from "../../src/storage/db.ts";
import { ResponseStore } from "../../src/storage/responses.ts";
import { UsageWriter } from "../../src/storage/usage-writer.ts";
import { useTempDb } from "./helpers.ts";

const tempDb = useTempDb();

const DAY = 86_400_000;

function setup(retentionDays: number) {
  const path = tempDb();
  const db = openDatabase(path);
  const keys = new ApiKeys(db);
  const a = keys.createKey("a").id;
  const b = keys.createKey("b").id;
  let now = new Date("2026-01-01T00:00:00Z");
  const store = new ResponseStore(db, retentionDays, () => now);
  const advance = (ms: number) => {
    now = new Date(now.getTime() + ms);
  };
  const count = () => Number((db.prepare("SELECT count(*) AS n FROM responses").get() as { n: number }).n);
  return { path, db, store, a, b, advance, count };
}

const stored = (id: string, keyId: number | null) => ({
  id,
  keyId,
  input: [{ type: "message", role: "user", content: "Hi" }],
  response: { id, object: "response", output: [] },
});

describe("ResponseStore", () => {
  it("shows a response only to the key that stored it, and deletes it only for that key", async () => {
    const { db, store, a, b } = setup(30);
    await store.save(stored("resp_1", a));
    expect(store.get("resp_1", a)).toEqual({
      input: [{ type: "message", role: "user", content: "Hi" }],
      response: { id: "resp_1", object: "response", output: [] },
    });
    expect(store.get("resp_1", b)).toBeUndefined();
    expect(store.get("resp_1", null)).toBeUndefined();
    expect(await store.delete("resp_1", b)).toBe(false);
    expect(await store.delete("resp_1", a)).toBe(true);
    expect(store.get("resp_1", a)).toBeUndefined();
    expect(await store.delete("resp_1", a)).toBe(false);
    db.close();
  });

  it("expires responses after the retention and purges them when another is stored", async () => {
    const { db, store, a, advance, count } = setup(2);
    await store.save(stored("resp_old", a));
    advance(DAY);
    expect(store.get("resp_old", a)).toBeDefined();
    advance(DAY);
    // Expired: invisible at once, and gone once the next response is stored.
    expect(store.get("resp_old", a)).toBeUndefined();
    expect(await store.delete("resp_old", a)).toBe(false);
    expect(count()).toBe(1);
    await store.save(stored("resp_new", a));
    expect(count()).toBe(1);
    expect(store.get("resp_new", a)).toBeDefined();
    db.close();
  });

  it("keeps responses until deleted with a retention of 0, and refuses a negative one", async () => {
    const { db, store, a, advance } = setup(0);
    await store.save(stored("resp_1", a));
    advance(10_000 * DAY);
    expect(await store.purgeExpired()).toBe(0);
    expect(store.get("resp_1", a)).toBeDefined();
    expect(() => new ResponseStore(db, -1)).toThrow(RangeError);
    db.close();
  });

  it("refuses a second response with the same id", async () => {
    const { db, store, a } = setup(30);
    await store.save(stored("resp_1", a));
    await expect(store.save(stored("resp_1", a))).rejects.toThrow();
    db.close();
  });

  it("writes through the writer thread: committed when save resolves, read on the store's connection", async () => {
    const { path, db, store, a, b, advance, count } = setup(1);
    const writer = new UsageWriter(path);
    await writer.open();
    store.writeThrough(writer);
    try {
      await store.save(stored("resp_t", a));
      expect(store.get("resp_t", a)?.response).toEqual({ id: "resp_t", object: "response", output: [] });
      expect(await store.delete("resp_t", b)).toBe(false);
      expect(await store.delete("resp_t", a)).toBe(true);
      await store.save(stored("resp_u", a));
      await expect(store.save(stored("resp_u", a))).rejects.toThrow(/UNIQUE/);
      advance(2 * DAY);
      expect(await store.purgeExpired()).toBe(1);
      expect(count()).toBe(0);
    } finally {
      await writer.close();
      db.close();
    }
  });
});
