/**
 * API keys. Only a SHA-256 of each key is stored, plus a short prefix so people can tell
 * keys apart in `keys list`. A key is random enough (256 bits) that an unsalted fast hash
 * is safe: there is nothing to brute-force, and the hash doubles as the lookup index.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { DatabaseSync, StatementSync } from "node:sqlite";
import { transaction } from "./db.ts";

/** Generated keys: `osk-` + 32 random bytes in base64url (43 characters). */
export const KEY_PATTERN = /^osk-[A-Za-z0-9_-]{43}$/;

/** Characters of a generated key kept for display: `osk-` plus 8 (48 bits, no use to an attacker). */
const PREFIX_LENGTH = 12;

const MAX_NAME_LENGTH = 100;

/** SQLite's primary result code for "another connection holds the lock". */
const SQLITE_BUSY = 5;

/** last_used_at is rewritten at most this often per key, so checking a key rarely writes. */
const TOUCH_INTERVAL_MS = 60_000;

export interface KeyInfo {
  id: number;
  prefix: string;
  name: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface CreatedKey {
  id: number;
  /** The key itself. It is not stored, so this is the only time anyone sees it. */
  key: string;
  prefix: string;
  name: string;
}

export interface VerifiedKey {
  id: number;
  name: string;
}

export function generateKey(): string {
  return `osk-${randomBytes(32).toString("base64url")}`;
}

export function hashKey(key: string): Buffer {
  return createHash("sha256").update(key, "utf8").digest();
}

/**
 * Display prefix. A value from ORTSERVE_API_KEY may be short or guessable, so at most a
 * quarter of it (and never more than 4 characters) is shown.
 */
export function keyPrefix(key: string): string {
  if (KEY_PATTERN.test(key)) return key.slice(0, PREFIX_LENGTH);
  return key.slice(0, Math.min(4, Math.floor(key.length / 4)));
}

interface KeyRow {
  id: number;
  prefix: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

const KEY_COLUMNS = "id, prefix, name, created_at, last_used_at, revoked_at";

function toInfo(row: KeyRow): KeyInfo {
  return {
    id: row.id,
    prefix: row.prefix,
    name: row.name,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

export class ApiKeys {
  readonly #db: DatabaseSync;
  readonly #byHash: StatementSync;
  readonly #touch: StatementSync;
  readonly #insert: StatementSync;
  #touchElsewhere: ((id: number) => void) | undefined;

  constructor(db: DatabaseSync) {
    this.#db = db;
    this.#byHash = db.prepare("SELECT id, name, hash, revoked_at FROM api_keys WHERE hash = ?");
    this.#touch = db.prepare(
      "UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)",
    );
    this.#insert = db.prepare(
      "INSERT INTO api_keys (hash, prefix, name, created_at) VALUES (?, ?, ?, ?) RETURNING id",
    );
  }

  createKey(name = "default"): CreatedKey {
    if (name.trim() === "" || name.length > MAX_NAME_LENGTH)
      throw new Error(`a key name must be 1 to ${MAX_NAME_LENGTH} characters`);
    const key = generateKey();
    const prefix = keyPrefix(key);
    const row = this.#insert.get(hashKey(key), prefix, name, new Date().toISOString());
    return { id: Number(row!.id), key, prefix, name };
  }

  listKeys(): KeyInfo[] {
    const rows = this.#db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY id`).all();
    return (rows as unknown as KeyRow[]).map(toInfo);
  }

  /**
   * Checks a presented key (the bearer token). Returns the key's id and name when it exists
   * and is not revoked. Revocation from another process takes effect on the next request.
   */
  verifyKey(presented: string): VerifiedKey | undefined {
    if (presented.length === 0) return undefined;
    const hash = hashKey(presented);
    const row = this.#byHash.get(hash) as
      | { id: number; name: string; hash: Uint8Array; revoked_at: string | null }
      | undefined;
    // The index finds the row; comparing in constant time keeps the check itself from leaking.
    if (!row || row.hash.length !== hash.length || !timingSafeEqual(row.hash, hash)) return undefined;
    if (row.revoked_at !== null) return undefined;
    if (this.#touchElsewhere) this.#touchElsewhere(row.id);
    else this.touchLastUsed(row.id);
    return { id: row.id, name: row.name };
  }

  /**
   * Hands last-used times to another writer (the server's usage writer thread), so checking a key
   * never waits for a commit on this thread.
   */
  touchThrough(touch: (id: number) => void): void {
    this.#touchElsewhere = touch;
  }

  /** Best effort: a busy database must not turn a valid key into a failed request. */
  touchLastUsed(id: number): void {
    const now = Date.now();
    try {
      this.#touch.run(new Date(now).toISOString(), id, new Date(now - TOUCH_INTERVAL_MS).toISOString());
    } catch (err) {
      if (((err as { errcode?: number }).errcode ?? 0) % 256 !== SQLITE_BUSY) throw err;
    }
  }

  /**
   * Revokes a key given its numeric id, its display prefix (as `keys list` shows it), or the
   * key itself (an ORTSERVE_API_KEY value too). Returns the key as now stored, or undefined if
   * nothing matched. Revoking a revoked key keeps its first revocation time.
   */
  revokeKey(idOrPrefix: string): KeyInfo | undefined {
    return transaction(this.#db, () => {
      const id = this.#resolve(idOrPrefix.trim());
      if (id === undefined) return undefined;
      this.#db
        .prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
        .run(new Date().toISOString(), id);
      return toInfo(this.#db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`).get(id) as never);
    });
  }

  #resolve(ref: string): number | undefined {
    if (ref === "") return undefined;
    if (/^\d+$/.test(ref)) {
      const row = this.#db.prepare("SELECT id FROM api_keys WHERE id = ?").get(Number(ref));
      return row ? Number(row.id) : undefined;
    }
    const byValue = this.#byHash.get(hashKey(ref));
    if (byValue) return Number(byValue.id);
    const matches = this.#db.prepare("SELECT id FROM api_keys WHERE prefix = ?").all(ref);
    if (matches.length > 1)
      throw new Error(
        `prefix "${ref}" matches ${matches.length} keys (ids ${matches.map((m) => m.id).join(", ")}); use the id`,
      );
    return matches.length === 1 ? Number(matches[0]!.id) : undefined;
  }

  /**
   * First start: when the database has no key at all (revoked ones count), creates one and
   * returns it so the server can print it once. Otherwise returns undefined.
   */
  ensureBootstrapKey(): CreatedKey | undefined {
    return transaction(this.#db, () => {
      if (this.#db.prepare("SELECT 1 FROM api_keys LIMIT 1").get()) return undefined;
      return this.createKey("bootstrap");
    });
  }

  /**
   * Registers the ORTSERVE_API_KEY value as a key named "env". Idempotent: the same value
   * always maps to the same row. A row that was revoked stays revoked (the caller may warn).
   */
  addEnvKey(value: string): KeyInfo {
    if (value.length === 0) throw new Error("ORTSERVE_API_KEY is empty");
    const hash = hashKey(value);
    this.#db
      .prepare(
        "INSERT INTO api_keys (hash, prefix, name, created_at) VALUES (?, ?, 'env', ?) ON CONFLICT (hash) DO NOTHING",
      )
      .run(hash, keyPrefix(value), new Date().toISOString());
    const row = this.#db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE hash = ?`).get(hash);
    return toInfo(row as unknown as KeyRow);
  }
}
