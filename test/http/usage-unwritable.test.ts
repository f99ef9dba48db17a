/**
 * The usage database stops taking writes: requests fail closed with a 503 rather than being served
 * unrecorded, every 200 has its row, and service resumes once rows can be written again. Rows are
 * written by the server's own connection on its writer thread, so the failure is put in the schema,
 * which every connection obeys: a trigger failing each insert with the message SQLite gives for a
 * full disk.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addSyntheticModel,
  chat,
  expectApiError,
  get,
  type Harness,
  startHarness,
  tinyRequest,
} from "./harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await startHarness((models) => addSyntheticModel(models, "tiny").then(() => undefined));
});
afterAll(() => h?.dispose());

const rows = () =>
  Number((h.server.storage.db.prepare("SELECT count(*) AS n FROM usage").get() as { n: number }).n);
const pragma = (sql: string) => h.server.storage.db.exec(sql);

describe("an unwritable usage database", () => {
  it("fails requests closed with a 503, never serves them unrecorded, and recovers", async () => {
    expect((await chat(h, tinyRequest())).status).toBe(200);
    // Full after a few more rows, as a disk fills while requests are in flight.
    const full = rows() + 5;
    pragma(`CREATE TRIGGER usage_disk_full BEFORE INSERT ON usage WHEN (SELECT count(*) FROM usage) >= ${full}
      BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END`);
    try {
      // Every answered request must have its row.
      let served = 0;
      let refused: Awaited<ReturnType<typeof chat>> | undefined;
      const before = rows();
      for (let i = 0; i < 500 && !refused; i++) {
        const r = await chat(h, tinyRequest({ messages: [{ role: "user", content: "x".repeat(200) }] }));
        if (r.status === 200) served++;
        else refused = r;
      }
      expect(refused, "the page limit was never reached").toBeDefined();
      expectApiError(refused!, 503, { code: "usage_unavailable", type: "service_unavailable_error" });
      expect(refused!.headers.get("retry-after")).toBe("5");
      expect(rows() - before).toBe(served);

      // New requests are refused before any work, streaming ones too; /health still answers.
      expectApiError(await chat(h, tinyRequest()), 503, { code: "usage_unavailable" });
      expectApiError(await chat(h, tinyRequest({ stream: true })), 503, { code: "usage_unavailable" });
      expect((await get(h, "/health", {})).status).toBe(200);
      expect(rows() - before).toBe(served);
    } finally {
      pragma("DROP TRIGGER usage_disk_full");
    }
    const again = rows();
    expect((await chat(h, tinyRequest())).status).toBe(200);
    expect(rows()).toBe(again + 1);
  });
});
