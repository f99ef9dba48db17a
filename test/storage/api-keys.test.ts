import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { hashKey, KEY_PATTERN, keyPrefix } from "../../src/storage/api-keys.ts";
import { openStorage } from "../../src/storage/storage.ts";
import { useTempDb } from "./helpers.ts";

const tempDb = useTempDb();

/** The database file and its WAL, as bytes (the WAL holds recent commits until a checkpoint). */
function dbBytes(path: string): Buffer {
  const parts = [path, `${path}-wal`].filter(existsSync).map((p) => readFileSync(p));
  return Buffer.concat(parts);
}

describe("API keys", () => {
  it("creates keys that verify, and rejects wrong ones", () => {
    const s = openStorage(tempDb());
    const a = s.keys.createKey("alice");
    const b = s.keys.createKey("bob");
    expect(a.key).toMatch(KEY_PATTERN);
    expect(a.key).toHaveLength(47);
    expect(a.prefix).toBe(a.key.slice(0, 12));
    expect(a.key).not.toBe(b.key);
    expect(s.keys.verifyKey(a.key)).toEqual({ id: a.id, name: "alice" });
    expect(s.keys.verifyKey(b.key)).toEqual({ id: b.id, name: "bob" });
    expect(s.keys.verifyKey(`${a.key.slice(0, -1)}${a.key.endsWith("A") ? "B" : "A"}`)).toBeUndefined();
    expect(s.keys.verifyKey(a.prefix)).toBeUndefined();
    expect(s.keys.verifyKey("")).toBeUndefined();
    expect(s.keys.verifyKey(`${a.key} `)).toBeUndefined();
    s.close();
  });

  it("records last use, and refuses a revoked key from then on", () => {
    const s = openStorage(tempDb());
    const k = s.keys.createKey("ci");
    expect(s.keys.listKeys()[0]!.lastUsedAt).toBeNull();
    s.keys.verifyKey(k.key);
    const [used] = s.keys.listKeys();
    expect(used!.lastUsedAt).not.toBeNull();
    expect(used!.revokedAt).toBeNull();

    const revoked = s.keys.revokeKey(String(k.id));
    expect(revoked?.revokedAt).not.toBeNull();
    expect(s.keys.verifyKey(k.key)).toBeUndefined();
    // Revoking again keeps the first time.
    expect(s.keys.revokeKey(k.prefix)?.revokedAt).toBe(revoked!.revokedAt);
    s.close();
  });

  it("revokes by id, prefix or the key itself, and reports unknown references", () => {
    const s = openStorage(tempDb());
    const [a, b, c] = [s.keys.createKey("a"), s.keys.createKey("b"), s.keys.createKey("c")];
    expect(s.keys.revokeKey(a.prefix)?.id).toBe(a.id);
    expect(s.keys.revokeKey(b.key)?.id).toBe(b.id);
    expect(s.keys.revokeKey(` ${c.id} `)?.id).toBe(c.id);
    expect(s.keys.revokeKey("999")).toBeUndefined();
    expect(s.keys.revokeKey("osk-nope")).toBeUndefined();
    expect(s.keys.revokeKey("")).toBeUndefined();
    expect(s.keys.listKeys().every((k) => k.revokedAt !== null)).toBe(true);
    s.close();
  });

  it("refuses to guess between keys sharing a prefix", () => {
    const s = openStorage(tempDb());
    // Two env-style keys with the same short display prefix.
    const x = s.keys.addEnvKey("same-prefix-value-one");
    const y = s.keys.addEnvKey("same-prefix-value-two");
    expect(x.prefix).toBe(y.prefix);
    expect(() => s.keys.revokeKey(x.prefix)).toThrow(/matches 2 keys/);
    expect(s.keys.listKeys().every((k) => k.revokedAt === null)).toBe(true);
    s.close();
  });

  it("stores only the hash: the key's text is nowhere in the files", () => {
    const path = tempDb();
    const s = openStorage(path);
    const { key } = s.keys.createKey("secret");
    const env = s.keys.addEnvKey("my-env-secret-value-1234");
    expect(env.prefix.length).toBeLessThanOrEqual(4);
    const secretPart = key.slice(12); // everything after the display prefix
    const check = () => {
      const bytes = dbBytes(path);
      expect(bytes.includes(hashKey(key))).toBe(true); // sanity: we are looking at the data
      expect(bytes.includes(Buffer.from(key))).toBe(false);
      expect(bytes.includes(Buffer.from(secretPart))).toBe(false);
      expect(bytes.includes(Buffer.from("my-env-secret-value-1234"))).toBe(false);
    };
    check();
    s.close();
    check();
  });

  it("bootstraps exactly one key, once, and never again", () => {
    const path = tempDb();
    const s = openStorage(path);
    const first = s.keys.ensureBootstrapKey();
    expect(first?.key).toMatch(KEY_PATTERN);
    expect(s.keys.ensureBootstrapKey()).toBeUndefined();
    s.close();
    const again = openStorage(path);
    expect(again.keys.ensureBootstrapKey()).toBeUndefined();
    expect(again.keys.listKeys()).toHaveLength(1);
    expect(again.keys.verifyKey(first!.key)?.id).toBe(first!.id);
    // All keys revoked is a decision, not a fresh install: no new key.
    again.keys.revokeKey(String(first!.id));
    expect(again.keys.ensureBootstrapKey()).toBeUndefined();
    again.close();
  });

  it("does not bootstrap when keys already exist", () => {
    const s = openStorage(tempDb());
    s.keys.addEnvKey("from-the-environment");
    expect(s.keys.ensureBootstrapKey()).toBeUndefined();
    expect(s.keys.listKeys()).toHaveLength(1);
    s.close();
  });

  it("adds the environment key idempotently", () => {
    const path = tempDb();
    const s = openStorage(path);
    const first = s.keys.addEnvKey("env-key-value-abcdef");
    expect(first.name).toBe("env");
    expect(s.keys.addEnvKey("env-key-value-abcdef")).toEqual(first);
    s.close();
    const again = openStorage(path);
    expect(again.keys.addEnvKey("env-key-value-abcdef").id).toBe(first.id);
    expect(again.keys.listKeys()).toHaveLength(1);
    expect(again.keys.verifyKey("env-key-value-abcdef")).toEqual({ id: first.id, name: "env" });
    expect(again.keys.addEnvKey("another-value").id).not.toBe(first.id);
    // A revoked env key stays revoked when the server starts with it again.
    again.keys.revokeKey("env-key-value-abcdef");
    expect(again.keys.addEnvKey("env-key-value-abcdef").revokedAt).not.toBeNull();
    expect(again.keys.verifyKey("env-key-value-abcdef")).toBeUndefined();
    expect(() => again.keys.addEnvKey("")).toThrow(/empty/);
    again.close();
  });

  it("shows little of short or custom keys", () => {
    expect(keyPrefix("abc")).toBe("");
    expect(keyPrefix("sk-test1")).toBe("sk");
    expect(keyPrefix("a-much-longer-custom-value")).toBe("a-mu");
  });

  it("sees keys created and revoked by another connection", () => {
    const path = tempDb();
    const server = openStorage(path);
    const cli = openStorage(path);
    const k = cli.keys.createKey("late");
    expect(server.keys.verifyKey(k.key)?.id).toBe(k.id);
    cli.keys.revokeKey(k.prefix);
    expect(server.keys.verifyKey(k.key)).toBeUndefined();
    cli.close();
    server.close();
  });

  it("rejects empty or oversized names", () => {
    const s = openStorage(tempDb());
    expect(() => s.keys.createKey(" ")).toThrow(/name/);
    expect(() => s.keys.createKey("x".repeat(101))).toThrow(/name/);
    s.close();
  });
});

describe("API keys under a busy database", () => {
  it("still verifies a key while another connection holds the write lock", () => {
    const path = tempDb();
    const server = openStorage(path);
    const k = server.keys.createKey("busy");
    server.db.exec("PRAGMA busy_timeout = 0");
    const other = openStorage(path);
    other.db.exec("BEGIN IMMEDIATE");
    expect(server.keys.verifyKey(k.key)).toEqual({ id: k.id, name: "busy" });
    other.db.exec("ROLLBACK");
    other.close();
    server.close();
  });
});
