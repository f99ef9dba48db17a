/**
 * Stored Responses API responses: what `store: true` keeps, for `GET` / `DELETE /v1/responses/{id}`
 * and `previous_response_id`. A response is visible only to the API key that created it; each
 * expires after the retention period (0: kept until deleted): never read again, and purged whenever
 * a response is stored and when the server starts.
 *
 * Reads run on the caller's connection (`ResponseStore`); writes go through `ResponseWrites`, which
 * the server sends to its writer thread (usage-writer.ts), so a commit's fsync never holds the
 * main thread. `ResponseTable` is the SQL of the writes, run wherever the connection is.
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";

/** One stored response: the conversation it answered and the response object, as JSON values. */
export interface StoredResponse {
  id: string;
  keyId: number | null;
  /** The conversation's input items, a previous response's included. */
  input: unknown[];
  response: Record<string, unknown>;
}

/** A stored response's row; times are ISO-8601 UTC, expiresAt null: kept until deleted. */
export interface ResponseRow {
  id: string;
  keyId: number | null;
  createdAt: string;
  expiresAt: string | null;
  input: string;
  response: string;
}

/** The writes, wherever they run; `now` is an ISO-8601 time (rows expired at it are gone). */
export interface ResponseWrites {
  insertResponse(row: ResponseRow): Promise<void>;
  /** True when a row of `keyId` was deleted. */
  deleteResponse(id: string, keyId: number | null, now: string): Promise<boolean>;
  purgeResponses(now: string): Promise<number>;
}

/** Default retention: 30 days, as OpenAI keeps stored responses. */
export const RESPONSE_RETENTION_DEFAULT_DAYS = 30;

const DAY_MS = 86_400_000;

/** The writes' SQL on one connection (the writer thread's, or the caller's own). */
export class ResponseTable {
  readonly #insert: StatementSync;
  readonly #delete: StatementSync;
  readonly #purge: StatementSync;

  constructor(db: DatabaseSync) {
    this.#insert = db.prepare(
      "INSERT INTO responses (id, key_id, created_at, expires_at, input, response) VALUES (?, ?, ?, ?, ?, ?)",
    );
    // `key_id IS ?` matches a NULL key (a caller without one) to NULL only.
    this.#delete = db.prepare(
      "DELETE FROM responses WHERE id = ? AND key_id IS ? AND (expires_at IS NULL OR expires_at > ?)",
    );
    this.#purge = db.prepare("DELETE FROM responses WHERE expires_at IS NOT NULL AND expires_at <= ?");
  }

  /** Purges what expired by the row's creation, then inserts it. */
  insert(row: ResponseRow): void {
    this.purge(row.createdAt);
    this.#insert.run(row.id, row.keyId, row.createdAt, row.expiresAt, row.input, row.response);
  }

  delete(id: string, keyId: number | null, now: string): boolean {
    return Number(this.#delete.run(id, keyId, now).changes) > 0;
  }

  purge(now: string): number {
    return Number(this.#purge.run(now).changes);
  }
}

/** A table's writes on the caller's own connection (an in-memory database has no other). */
export function directWrites(table: ResponseTable): ResponseWrites {
  return {
    insertResponse: async (row) => table.insert(row),
    deleteResponse: async (id, keyId, now) => table.delete(id, keyId, now),
    purgeResponses: async (now) => table.purge(now),
  };
}

export class ResponseStore {
  readonly #get: StatementSync;
  readonly #retentionMs: number;
  readonly #now: () => Date;
  #writes: ResponseWrites;

  /** `retentionDays`: how long a response is kept (0: until deleted). */
  constructor(
    db: DatabaseSync,
    retentionDays = RESPONSE_RETENTION_DEFAULT_DAYS,
    now: () => Date = () => new Date(),
  ) {
    if (!Number.isFinite(retentionDays) || retentionDays < 0)
      throw new RangeError(`retention must be a non-negative number of days (got ${retentionDays})`);
    this.#retentionMs = retentionDays * DAY_MS;
    this.#now = now;
    this.#writes = directWrites(new ResponseTable(db));
    this.#get = db.prepare(
      "SELECT input, response FROM responses WHERE id = ? AND key_id IS ? AND (expires_at IS NULL OR expires_at > ?)",
    );
  }

  /** Sends the writes elsewhere (the server's writer thread). */
  writeThrough(writes: ResponseWrites): void {
    this.#writes = writes;
  }

  /** Resolves once the response is committed. */
  save(stored: StoredResponse): Promise<void> {
    const now = this.#now();
    return this.#writes.insertResponse({
      id: stored.id,
      keyId: stored.keyId,
      createdAt: now.toISOString(),
      expiresAt: this.#retentionMs > 0 ? new Date(now.getTime() + this.#retentionMs).toISOString() : null,
      input: JSON.stringify(stored.input),
      response: JSON.stringify(stored.response),
    });
  }

  /** The response `id` if `keyId` created it and it has not expired. */
  get(id: string, keyId: number | null): Omit<StoredResponse, "id" | "keyId"> | undefined {
    const row = this.#get.get(id, keyId, this.#now().toISOString()) as
      | { input: string; response: string }
      | undefined;
    if (!row) return undefined;
    return { input: JSON.parse(row.input) as unknown[], response: JSON.parse(row.response) };
  }

  /** Deletes the response `id` if `keyId` created it; false when there was none to delete. */
  delete(id: string, keyId: number | null): Promise<boolean> {
    return this.#writes.deleteResponse(id, keyId, this.#now().toISOString());
  }

  /** Removes every response expired by now; resolves to how many. */
  purgeExpired(): Promise<number> {
    return this.#writes.purgeResponses(this.#now().toISOString());
  }
}
