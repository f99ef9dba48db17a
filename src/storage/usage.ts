/**
 * Usage records: one row per request, committed (and fsynced, see db.ts) before the response
 * completes, so a request that was answered is a request that was counted.
 */
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import { invalidRequest } from "../errors.ts";

export interface UsageRecord {
  /** When the request arrived; now by default. */
  time?: Date;
  /** api_keys.id of the caller; null when auth is off. */
  keyId?: number | null;
  /** From the project header: both, neither, or a project alone (OpenAI-Project's project id). */
  team?: string | null;
  project?: string | null;
  model: string;
  checkpoint?: string | null;
  requestId?: string | null;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  latencyMs: number;
  /** HTTP status sent (or meant to be sent); 400 and above count as errors. */
  status: number;
}

export const USAGE_GROUPS = ["project", "key", "model"] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

export interface UsageTotalsQuery {
  by: UsageGroup;
  /** Only requests at or after this time (a Date or an ISO-8601 string). */
  since?: Date | string;
}

export interface UsageTotals {
  /** "team/project" (or a project id alone), the key id, or the model; null for requests without one. */
  group: string | null;
  /** For `by: "key"`: the key's display prefix and name (null if unknown). */
  keyPrefix?: string | null;
  keyName?: string | null;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  errors: number;
}

const SUMS = `count(*) AS requests,
  coalesce(sum(u.prompt_tokens), 0) AS prompt,
  coalesce(sum(u.completion_tokens), 0) AS completion,
  coalesce(sum(u.cached_tokens), 0) AS cached,
  coalesce(sum(u.status >= 400), 0) AS errors`;
const SINCE = "WHERE (?1 IS NULL OR u.time >= ?1)";

const TOTALS_SQL: Record<UsageGroup, string> = {
  project: `SELECT CASE WHEN u.team IS NULL THEN u.project ELSE u.team || '/' || u.project END AS grp, ${SUMS}
    FROM usage u ${SINCE} GROUP BY grp ORDER BY grp`,
  key: `SELECT u.key_id AS grp, k.prefix AS key_prefix, k.name AS key_name, ${SUMS}
    FROM usage u LEFT JOIN api_keys k ON k.id = u.key_id ${SINCE} GROUP BY u.key_id ORDER BY u.key_id`,
  model: `SELECT u.model AS grp, ${SUMS} FROM usage u ${SINCE} GROUP BY u.model ORDER BY u.model`,
};

function count(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0)
    throw new RangeError(`${name} must be a non-negative integer (got ${value})`);
  return value;
}

// Date parsing alone is too lenient ("1" is a date to it), so strings must look like ISO-8601.
const ISO_TIME = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/i;

/**
 * The instant in the form stored in the database (Date#toISOString), or a RangeError.
 * A date alone means midnight UTC; a time without an offset is local time.
 */
interface PendingRow {
  row: SQLInputValue[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The INSERT parameters of a record, validated. */
function usageRow(record: UsageRecord): SQLInputValue[] {
  const latency = record.latencyMs;
  if (!Number.isFinite(latency) || latency < 0)
    throw new RangeError(`latencyMs must be a non-negative number (got ${latency})`);
  return [
    toIsoTime(record.time ?? new Date()),
    record.keyId ?? null,
    record.team ?? null,
    record.project ?? null,
    record.model,
    record.checkpoint ?? null,
    record.requestId ?? null,
    count("promptTokens", record.promptTokens),
    count("completionTokens", record.completionTokens),
    count("cachedTokens", record.cachedTokens),
    latency,
    count("status", record.status),
  ];
}

export function toIsoTime(value: Date | string): string {
  if (typeof value === "string" && !ISO_TIME.test(value))
    throw new RangeError(`not an ISO-8601 date/time: "${value}"`);
  const date = typeof value === "string" ? new Date(value) : value;
  if (Number.isNaN(date.getTime())) throw new RangeError(`not a valid date/time: "${String(value)}"`);
  return date.toISOString();
}

export class UsageLog {
  readonly #db: DatabaseSync;
  readonly #insert: StatementSync;
  #pending: PendingRow[] = [];

  constructor(db: DatabaseSync) {
    this.#db = db;
    this.#insert = db.prepare(`INSERT INTO usage (time, key_id, team, project, model, checkpoint, request_id,
      prompt_tokens, completion_tokens, cached_tokens, latency_ms, status)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  }

  /** Stores one request's usage; returns once the row is committed to disk. */
  recordUsage(record: UsageRecord): void {
    this.#insert.run(...usageRow(record));
  }

  /**
   * Stores one request's usage with group commit: the rows queued during one turn of the event
   * loop are committed in one transaction at the next (one fsync for all of them: a batch step
   * ends many requests at once, and an fsync per row stalls every stream). Resolves once this
   * row is committed to disk; rejects if it was refused (its batch-mates are unaffected).
   */
  commitUsage(record: UsageRecord): Promise<void> {
    let row: SQLInputValue[];
    try {
      row = usageRow(record);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      if (this.#pending.push({ row, resolve, reject }) === 1) setImmediate(() => this.#commitPending());
    });
  }

  #commitPending(): void {
    const batch = this.#pending;
    this.#pending = [];
    const refused: [PendingRow, unknown][] = [];
    try {
      this.#db.exec("BEGIN IMMEDIATE");
    } catch (err) {
      for (const p of batch) p.reject(err);
      return;
    }
    // A row that breaks a constraint fails its own statement only; the transaction goes on.
    for (const p of batch)
      try {
        this.#insert.run(...p.row);
      } catch (err) {
        refused.push([p, err]);
      }
    try {
      this.#db.exec("COMMIT");
    } catch (err) {
      try {
        this.#db.exec("ROLLBACK");
      } catch {
        // COMMIT's failure may already have ended the transaction.
      }
      for (const p of batch) p.reject(err);
      return;
    }
    const failed = new Set(refused.map(([p]) => p));
    for (const [p, err] of refused) p.reject(err);
    for (const p of batch) if (!failed.has(p)) p.resolve();
  }

  /**
   * Whether a usage row can be written now: one is inserted and rolled back, so a read-only file,
   * a full disk or a page limit shows up here without leaving anything behind.
   */
  canWrite(): boolean {
    try {
      this.#db.exec("SAVEPOINT usage_probe");
      try {
        this.recordUsage({
          model: "(probe)",
          promptTokens: 0,
          completionTokens: 0,
          cachedTokens: 0,
          latencyMs: 0,
          status: 0,
        });
      } finally {
        this.#db.exec("ROLLBACK TO usage_probe; RELEASE usage_probe");
      }
      return true;
    } catch {
      return false;
    }
  }

  usageTotals(query: UsageTotalsQuery): UsageTotals[] {
    const sql = TOTALS_SQL[query.by];
    if (!sql) throw new RangeError(`usage can be grouped by ${USAGE_GROUPS.join(", ")} (got "${query.by}")`);
    const since = query.since === undefined ? null : toIsoTime(query.since);
    return this.#db
      .prepare(sql)
      .all(since)
      .map((r) => ({
        group: r.grp === null ? null : String(r.grp),
        ...(query.by === "key"
          ? { keyPrefix: r.key_prefix as string | null, keyName: r.key_name as string | null }
          : {}),
        requests: Number(r.requests),
        promptTokens: Number(r.prompt),
        completionTokens: Number(r.completion),
        cachedTokens: Number(r.cached),
        errors: Number(r.errors),
      }));
  }
}

const PART = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Parses a `Compat-Project` / `OpenAI-Project` header value, `<team>/<project>`. Each part is
 * 1 to 64 of A-Z a-z 0-9 . _ - and is not "." or "..", so it is safe as a path segment too.
 * Throws a 400 ApiError naming the header.
 */
export function parseProjectHeader(
  value: string,
  header = "Compat-Project",
): { team: string; project: string } {
  const shown = JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
  const fail = (why: string) =>
    invalidRequest(
      `Invalid ${header} header ${shown}: ${why}. Expected "<team>/<project>", each part 1 to 64 characters ` +
        'of letters, digits, ".", "_" or "-".',
      header,
    );
  const parts = value.split("/");
  if (parts.length !== 2) throw fail(parts.length < 2 ? 'missing "/"' : 'more than one "/"');
  const [team, project] = parts as [string, string];
  for (const [label, part] of [
    ["team", team],
    ["project", project],
  ] as const) {
    if (part.length === 0) throw fail(`${label} is empty`);
    if (part.length > 64) throw fail(`${label} is longer than 64 characters`);
    if (!PART.test(part))
      throw fail(`${label} contains a character other than letters, digits, ".", "_" or "-"`);
    if (part === "." || part === "..") throw fail(`${label} cannot be "${part}"`);
  }
  return { team, project };
}

/** Longest project id `OpenAI-Project` may carry alone. */
export const MAX_PROJECT_ID = 256;
const PRINTABLE = /^[\x20-\x7e]+$/;

/**
 * Parses an `OpenAI-Project` header value. The official SDKs send the caller's project id there
 * (`proj_abc123`, from OPENAI_PROJECT_ID or the client option): any printable ASCII value up to
 * MAX_PROJECT_ID characters is that project, with no team. A value that reads as `<team>/<project>`
 * under Compat-Project's rule is taken as team and project, as Compat-Project would.
 * Throws a 400 ApiError naming the header.
 */
export function parseOpenAIProjectHeader(value: string): { team: string | null; project: string } {
  const parts = value.split("/");
  if (parts.length === 2 && parts.every((part) => PART.test(part) && part !== "." && part !== ".."))
    return { team: parts[0]!, project: parts[1]! };
  const shown = JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
  if (value.length > MAX_PROJECT_ID || !PRINTABLE.test(value) || value.trim() !== value)
    throw invalidRequest(
      `Invalid OpenAI-Project header ${shown}: expected a project id of 1 to ${MAX_PROJECT_ID} printable ASCII ` +
        'characters without leading or trailing spaces, or "<team>/<project>".',
      "OpenAI-Project",
    );
  return { team: null, project: value };
}
