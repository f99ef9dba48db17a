import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { KEY_PATTERN } from "../../src/storage/api-keys.ts";
import { openStorage } from "../../src/storage/storage.ts";
import { repoRoot } from "../../src/util/paths.ts";
import { useTempDb } from "./helpers.ts";

const tempDb = useTempDb();

// The repo's own Node 24 runs the real entry point, with ORTSERVE_DB pointing at a temp file.
const node = join(repoRoot, "node_modules", ".bin", "node");
function cli(db: string, ...args: string[]) {
  return spawnSync(node, [join(repoRoot, "src/cli/main.ts"), ...args], {
    encoding: "utf8",
    timeout: 30_000,
    env: { ...process.env, ORTSERVE_DB: db, ORTSERVE_DEBUG: "" },
  });
}

describe("ortserve keys / usage", () => {
  it("creates, lists and revokes keys end to end", () => {
    const db = tempDb();
    const created = cli(db, "keys", "create", "--name", "ci-bot");
    expect(created.status).toBe(0);
    const key = created.stdout.trim();
    expect(key).toMatch(KEY_PATTERN);
    expect(created.stderr).toContain("shown only this once");
    expect(created.stderr).toContain('"ci-bot"');
    expect(created.stderr).not.toContain(key);

    const s = openStorage(db);
    expect(s.keys.verifyKey(key)?.name).toBe("ci-bot");

    const listed = cli(db, "keys", "list");
    expect(listed.status).toBe(0);
    expect(listed.stdout).toMatch(/^ID\s+PREFIX\s+NAME\s+CREATED\s+LAST USED\s+REVOKED$/m);
    expect(listed.stdout).toContain(key.slice(0, 12));
    expect(listed.stdout).toContain("ci-bot");
    expect(listed.stdout).not.toContain(key);

    const revoked = cli(db, "keys", "revoke", key.slice(0, 12));
    expect(revoked.status).toBe(0);
    expect(revoked.stdout).toMatch(/^Revoked key 1 /);
    // Another connection (the "server") sees the revocation at once.
    expect(s.keys.verifyKey(key)).toBeUndefined();
    s.close();

    const json = JSON.parse(cli(db, "keys", "list", "--json").stdout);
    expect(json).toEqual([expect.objectContaining({ id: 1, name: "ci-bot", revokedAt: expect.any(String) })]);

    const missing = cli(db, "keys", "revoke", "42");
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain('no key with id or prefix "42"');
  });

  it("takes --db over ORTSERVE_DB", () => {
    const envDb = tempDb();
    const flagDb = tempDb();
    expect(cli(envDb, "keys", "create", "--db", flagDb).status).toBe(0);
    const s = openStorage(flagDb);
    expect(s.keys.listKeys()).toHaveLength(1);
    s.close();
    expect(cli(envDb, "keys", "list").stdout).toContain("No API keys yet");
  });

  it("rejects bad key commands with exit code 2", () => {
    const db = tempDb();
    for (const args of [
      ["keys"],
      ["keys", "rotate"],
      ["keys", "revoke"],
      ["keys", "list", "extra"],
      ["keys", "list", "--name", "x"],
      ["keys", "create", "--json"],
    ]) {
      const r = cli(db, ...args);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stderr).toContain("ortserve keys:");
    }
  });

  it("prints usage totals as a table or JSON", () => {
    const db = tempDb();
    const s = openStorage(db);
    const k = s.keys.createKey("team-key");
    const base = { model: "smollm2", promptTokens: 10, completionTokens: 4, cachedTokens: 2, latencyMs: 5 };
    s.usage.recordUsage({ ...base, keyId: k.id, team: "acme", project: "bot", status: 200 });
    s.usage.recordUsage({ ...base, keyId: k.id, team: "acme", project: "bot", status: 500 });
    s.usage.recordUsage({ ...base, time: new Date("2020-01-01T00:00:00Z"), status: 200 });
    s.close();

    const table = cli(db, "usage");
    expect(table.status).toBe(0);
    expect(table.stdout).toMatch(/^PROJECT\s+REQUESTS\s+PROMPT\s+COMPLETION\s+CACHED\s+ERRORS$/m);
    expect(table.stdout).toMatch(/^acme\/bot\s+2\s+20\s+8\s+4\s+1$/m);
    expect(table.stdout).toMatch(/^\(no project\)\s+1\s+10\s+4\s+2\s+0$/m);
    expect(table.stdout).toMatch(/^TOTAL\s+3\s+30\s+12\s+6\s+1$/m);

    const byKey = cli(db, "usage", "--by", "key");
    expect(byKey.stdout).toMatch(new RegExp(`^${k.id} ${k.prefix} \\(team-key\\)\\s+2\\s`, "m"));

    const json = JSON.parse(cli(db, "usage", "--by", "model", "--since", "2024-01-01", "--json").stdout);
    expect(json).toEqual({
      by: "model",
      since: "2024-01-01T00:00:00.000Z",
      rows: [
        { group: "smollm2", requests: 2, promptTokens: 20, completionTokens: 8, cachedTokens: 4, errors: 1 },
      ],
    });
    expect(cli(db, "usage", "--since", "2099-01-01").stdout).toContain("No usage recorded since");
  });

  it("rejects bad usage options with exit code 2", () => {
    const db = tempDb();
    const by = cli(db, "usage", "--by", "team");
    expect(by.status).toBe(2);
    expect(by.stderr).toContain("--by must be one of project, key, model");
    const since = cli(db, "usage", "--since", "yesterday");
    expect(since.status).toBe(2);
    expect(since.stderr).toContain("--since must be an ISO-8601");
  });

  it.each(["keys", "usage"])("prints %s --help without opening a database", (name) => {
    const r = cli("/nonexistent/dir/never.db", name, "--help");
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^Usage: ortserve ${name}`));
    expect(r.stderr).toBe("");
  });
});
