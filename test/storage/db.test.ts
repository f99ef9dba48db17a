import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { dbPath, migrate, openDatabase, schemaVersion } from "../../src/storage/db.ts";
import { MIGRATIONS } from "../../src/storage/migrations.ts";
import { repoRoot } from "../../src/util/paths.ts";
import { useTempDb } from "./helpers.ts";

const tempDb = useTempDb();

const pragma = (db: DatabaseSync, name: string) => Object.values(db.prepare(`PRAGMA ${name}`).get()!)[0];

describe("database", () => {
  it("resolves its path from --db, then ORTSERVE_DB, then the repo cache", () => {
    expect(dbPath(undefined, {})).toBe(join(repoRoot, ".cache", "ortserve.db"));
    expect(dbPath(undefined, { ORTSERVE_DB: "rel.db" })).toBe(resolve("rel.db"));
    expect(dbPath("/x/cli.db", { ORTSERVE_DB: "/y/env.db" })).toBe("/x/cli.db");
  });

  it("creates parent dirs and an owner-only file, in WAL mode with the pragmas set", () => {
    const path = tempDb();
    const db = openDatabase(path);
    expect(pragma(db, "journal_mode")).toBe("wal");
    expect(pragma(db, "foreign_keys")).toBe(1);
    expect(pragma(db, "synchronous")).toBe(2); // FULL
    expect(pragma(db, "busy_timeout")).toBeGreaterThan(0);
    db.close();
    expect(statSync(path).mode & 0o777).toBe(0o600);
    // WAL is a property of the file: a plain connection sees it too.
    const plain = new DatabaseSync(path);
    expect(pragma(plain, "journal_mode")).toBe("wal");
    plain.close();
  });

  it("applies each migration once, however often the file is reopened", () => {
    const path = tempDb();
    for (let i = 0; i < 3; i++) {
      const db = openDatabase(path);
      expect(schemaVersion(db)).toBe(MIGRATIONS.at(-1)!.version);
      migrate(db);
      const rows = db.prepare("SELECT version FROM schema_migrations ORDER BY version").all();
      expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
      db.close();
    }
  });

  it("keeps migration versions strictly increasing", () => {
    const versions = MIGRATIONS.map((m) => m.version);
    expect(versions[0]).toBe(1);
    for (let i = 1; i < versions.length; i++) expect(versions[i]).toBeGreaterThan(versions[i - 1]!);
  });

  it("rolls back a failing migration with its version row", () => {
    const db = new DatabaseSync(":memory:");
    const broken = [
      ...MIGRATIONS,
      { version: 99, name: "broken", sql: "CREATE TABLE half (x INTEGER); SELECT * FROM no_such_table;" },
    ];
    expect(() => migrate(db, broken)).toThrow(/no_such_table/);
    expect(schemaVersion(db)).toBe(MIGRATIONS.at(-1)!.version);
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'half'").get()).toBeUndefined();
    db.close();
  });

  it("refuses a database from a newer schema", () => {
    const path = tempDb();
    openDatabase(path).close();
    const raw = new DatabaseSync(path);
    raw.exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 'x')");
    raw.close();
    expect(() => openDatabase(path)).toThrow(/schema version 999 is newer/);
  });
});
