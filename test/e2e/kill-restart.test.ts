/**
 * `kill -9` of a real `ortserve serve` process under concurrent load, then a restart on the same
 * SQLite file: every request whose response arrived complete (a non-streaming 200 body, or a stream
 * that reached `data: [DONE]`) has its usage row, found by its X-Request-Id, and the database passes
 * `PRAGMA integrity_check`. Usage rows are committed before a response's last byte, so a complete
 * response implies a durable row; a response cut by the kill may or may not have one.
 *
 * Raw fetch rather than the openai client: the client ends a stream quietly when the connection
 * drops, and this test must tell a stream that reached [DONE] from one that was cut.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { generateKey } from "../../src/storage/api-keys.ts";
import { repoRoot } from "../../src/util/paths.ts";
import { type ServerProcess, startServerProcess } from "./server-process.ts";

const MODEL = "smollm2-135m-instruct";
const root = mkdtempSync(join(tmpdir(), "ortserve-kill-"));
const dbPath = join(root, "ortserve.db");
const apiKey = generateKey();
const servers: ServerProcess[] = [];

afterAll(async () => {
  for (const s of servers) await s.stop("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

async function start(): Promise<ServerProcess> {
  const s = await startServerProcess({ modelsDir: join(repoRoot, "models"), dbPath, apiKey });
  servers.push(s);
  return s;
}

/** Sends one chat request; resolves true when its response arrived complete, false when it was cut. */
async function complete(url: string, id: string, stream: boolean, maxTokens: number): Promise<boolean> {
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json", "X-Request-Id": id },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: `Count to ${maxTokens}.` }],
        max_tokens: maxTokens,
        ignore_eos: true,
        stream,
      }),
    });
    const text = await res.text();
    if (res.status !== 200) return false;
    return stream ? text.trimEnd().endsWith("data: [DONE]") : JSON.parse(text).object === "chat.completion";
  } catch {
    return false;
  }
}

describe("kill -9 under load, then restart on the same database", () => {
  it("keeps a usage row for every complete response and an intact database", async () => {
    const first = await start();
    // Load the model before the load starts, so completions arrive while others are mid-flight.
    expect(await complete(first.url, "warm-up", false, 2)).toBe(true);

    const requests = Array.from({ length: 16 }, (_, i) => ({
      id: `load-${i}`,
      stream: i % 2 === 0,
      // Short and long generations: some finish before the kill, some are cut by it.
      maxTokens: 4 + ((i * 37) % 120),
    }));
    const completed: string[] = [];
    let settled = 0;
    const results = requests.map((r) =>
      complete(first.url, r.id, r.stream, r.maxTokens).then((ok) => {
        settled++;
        if (ok) completed.push(r.id);
        return ok;
      }),
    );
    // Kill once a few responses are complete and the rest are still running.
    while (completed.length < 4 && settled < requests.length) await new Promise((r) => setTimeout(r, 5));
    expect(completed.length).toBeGreaterThanOrEqual(4);
    first.child.kill("SIGKILL");
    await Promise.all(results);
    expect(completed.length).toBeLessThan(requests.length);

    const second = await start();
    // The restarted server serves on the same file.
    expect(await complete(second.url, "after-restart", true, 3)).toBe(true);

    const db = new DatabaseSync(dbPath, { readOnly: true });
    try {
      expect(db.prepare("PRAGMA integrity_check").all()).toEqual([{ integrity_check: "ok" }]);
      const rows = db.prepare("SELECT request_id, status, completion_tokens FROM usage").all() as {
        request_id: string;
        status: number;
        completion_tokens: number;
      }[];
      const byId = new Map(rows.map((r) => [r.request_id, r]));
      for (const id of [...completed, "warm-up", "after-restart"]) {
        const row = byId.get(id);
        expect(row, `usage row of ${id}`).toBeDefined();
        expect(row!.status).toBe(200);
        expect(row!.completion_tokens).toBeGreaterThan(0);
      }
      // No request is recorded twice.
      expect(byId.size).toBe(rows.length);
    } finally {
      db.close();
    }
  }, 180_000);
});
