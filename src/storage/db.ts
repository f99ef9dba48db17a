/**
 * The embedded SQLite database holding API keys and usage records (node:sqlite, one file).
 * The server and the `keys`/`usage` commands may have it open at the same time, so it runs
 * in WAL mode (readers never block the writer) with a busy timeout for the rare write overlap.
 */
import { closeSync, mkdirSync, openSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { repoRoot } from "../util/paths.ts";
import { MIGRATIONS, type Migration } from "./migrations.ts";

type Env = Record<string, string | undefined>;

/** How long a writer waits for another connection's write lock before failing with SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5_000;

/**
 * Database file. Precedence: an explicit `--db` value, then `ORTSERVE_DB`, then
 * `<repo>/.cache/ortserve.db`. Not under ORTSERVE_CACHE_DIR: keys are not a cache to be wiped.
 */
export function dbPath(override?: string, env: Env = process.env): string {
  const chosen = override || env.ORTSERVE_DB;
  return chosen ? resolve(chosen) : resolve(repoRoot, ".cache", "ortserve.db");
}

/** Opens (creating if needed) the database at `path` and brings its schema up to date. */
export function openDatabase(path: string = dbPath()): DatabaseSync {
  if (path !== ":memory:") {
    mkdirSync(dirname(path), { recursive: true });
    // Owner-only from the start; SQLite gives the -wal and -shm files the same mode.
    closeSync(openSync(path, "a", 0o600));
  }
  const db = new DatabaseSync(path);
  try {
    db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    db.exec("PRAGMA journal_mode = WAL");
    // NORMAL under WAL survives a process crash but may lose the last commits on power loss.
    // Usage records must be on disk before the response completes, and one fsync per request
    // is nothing next to generating it, so every commit is synced.
    db.exec("PRAGMA synchronous = FULL");
    db.exec("PRAGMA foreign_keys = ON");
    migrate(db);
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/**
 * Runs `fn` inside `BEGIN IMMEDIATE`: the write lock is taken up front, so a read-then-write
 * (check, then insert) cannot interleave with another connection's.
 */
export function transaction<T>(db: DatabaseSync, fn: () => T): T {
  db.exec("BEGIN IMMEDIATE");
  try {
    const result = fn();
    db.exec("COMMIT");
    return result;
  } catch (err) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw err;
  }
}

/** Highest migration version applied to `db` (0 for a fresh database). */
export function schemaVersion(db: DatabaseSync): number {
  const row = db.prepare("SELECT coalesce(max(version), 0) AS v FROM schema_migrations").get();
  return Number(row?.v ?? 0);
}

/**
 * Applies the pending migrations in order, each in its own transaction together with its row
 * in schema_migrations. The version is re-read under the write lock, so two processes opening
 * a fresh file at once do not both apply it.
 */
export function migrate(db: DatabaseSync, migrations: readonly Migration[] = MIGRATIONS): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
  ) STRICT`);
  const latest = migrations.at(-1)?.version ?? 0;
  const current = schemaVersion(db);
  if (current > latest)
    throw new Error(
      `database schema version ${current} is newer than this ortserve knows (${latest}); ` +
        "use a newer ortserve or point ORTSERVE_DB at another file",
    );
  for (const migration of migrations) {
    if (migration.version <= current) continue;
    transaction(db, () => {
      if (schemaVersion(db) >= migration.version) return;
      db.exec(migration.sql);
      db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(
        migration.version,
        migration.name,
        new Date().toISOString(),
      );
    });
  }
}
