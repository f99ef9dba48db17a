/**
 * Usage rows are committed on a thread of their own: while another connection holds the
 * database's write lock (as a slow fsync or a `keys` command would), a finished request waits for
 * its row, but the server's main thread — which writes every stream's chunks — stays free.
 */
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addSyntheticModel, chat, get, type Harness, startHarness, tinyRequest } from "./harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await startHarness((models) => addSyntheticModel(models, "tiny").then(() => undefined));
});
afterAll(() => h?.dispose());

const rows = (db: DatabaseSync) =>
  Number((db.prepare("SELECT count(*) AS n FROM usage").get() as { n: number }).n);

describe("the usage writer thread", () => {
  it("keeps the main thread free while a commit waits for the write lock", async () => {
    expect((await chat(h, tinyRequest())).status).toBe(200);
    const other = new DatabaseSync(h.server.storage.path);
    const before = rows(other);
    other.exec("BEGIN IMMEDIATE");
    let answered = false;
    const pending = chat(h, tinyRequest()).then((r) => {
      answered = true;
      return r;
    });
    try {
      // The old main-thread commit would spin in SQLite's busy wait here, and nothing would answer.
      for (let i = 0; i < 5; i++) {
        expect((await get(h, "/health", {})).status).toBe(200);
        await new Promise((r) => setTimeout(r, 50));
      }
      // The response completes only after its row is on disk.
      expect(answered).toBe(false);
    } finally {
      other.exec("COMMIT");
    }
    expect((await pending).status).toBe(200);
    expect(rows(other)).toBe(before + 1);
    other.close();
  });

  it("records a key's last use through the writer", async () => {
    const db = new DatabaseSync(h.server.storage.path);
    db.exec("UPDATE api_keys SET last_used_at = NULL");
    expect((await chat(h, tinyRequest())).status).toBe(200);
    const used = () =>
      (db.prepare("SELECT count(*) AS n FROM api_keys WHERE last_used_at IS NOT NULL").get() as { n: number })
        .n;
    for (let i = 0; i < 50 && Number(used()) === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(Number(used())).toBe(1);
    db.close();
  });
});
