/**
 * Stored Responses API responses: what `store: true` keeps, for `GET` / `DELETE /v1/responses/{id}`
 * and `previous_response_id`. A response is visible only to the API key that created it; each
 * expires after the retention period (0: kept until deleted): never read again, and purged whenever
 * a response is stored and when the server starts.
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

/** Default retention: 30 days, as OpenAI keeps stored responses. */
export const RESPONSE_RETENTION_DEFAULT_DAYS = 30;

const DAY_MS = 86_400_000;

export class ResponseStore {
  readonly #insert: StatementSync;
  readonly #get: StatementSync;
  readonly #delete: StatementSync;
  readonly #purge: StatementSync;
  readonly #retentionMs: number;
  readonly #now: () => Date;

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
    this.#insert = db.prepare(
      "INSERT INTO responses (id, key_id, created_at, expires_at, input, response) VALUES (?, ?, ?, ?, ?, ?)",
    );
    // `key_id IS ?` matches a NULL key (a caller without one) to NULL only.
    this.#get = db.prepare(
      "SELECT input, response FROM responses WHERE id = ? AND key_id IS ? AND (expires_at IS NULL OR expires_at > ?)",
    );
    this.#delete = db.prepare(
      "DELETE FROM responses WHERE id = ? AND key_id IS ? AND (expires_at IS NULL OR expires_at > ?)",
    );
    this.#purge = db.prepare("DELETE FROM responses WHERE expires_at IS NOT NULL AND expires_at <= ?");
  }

  save(stored: StoredResponse): void {
    const now = this.#now();
    this.purgeExpired(now);
    const expires = this.#retentionMs > 0 ? new Date(now.getTime() + this.#retentionMs).toISOString() : null;
    this.#insert.run(
      stored.id,
      stored.keyId,
      now.toISOString(),
      expires,
      JSON.stringify(stored.input),
      JSON.stringify(stored.response),
    );
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
  delete(id: string, keyId: number | null): boolean {
    return Number(this.#delete.run(id, keyId, this.#now().toISOString()).changes) > 0;
  }

  /** Removes every response expired at `now`; returns how many. */
  purgeExpired(now: Date = this.#now()): number {
    return Number(this.#purge.run(now.toISOString()).changes);
  }
}
