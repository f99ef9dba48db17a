/** One open database with its key, usage and stored-response stores: what the server and the CLI hold. */
import type { DatabaseSync } from "node:sqlite";
import { ApiKeys } from "./api-keys.ts";
import { dbPath, openDatabase } from "./db.ts";
import { RESPONSE_RETENTION_DEFAULT_DAYS, ResponseStore } from "./responses.ts";
import { UsageLog } from "./usage.ts";

export interface Storage {
  path: string;
  db: DatabaseSync;
  keys: ApiKeys;
  usage: UsageLog;
  responses: ResponseStore;
  close(): void;
}

/**
 * Opens `path` (default: dbPath(), i.e. ORTSERVE_DB or <repo>/.cache/ortserve.db).
 * `responseRetentionDays`: how long stored responses are kept (0: until deleted).
 */
export function openStorage(path: string = dbPath(), opts: { responseRetentionDays?: number } = {}): Storage {
  const db = openDatabase(path);
  return {
    path,
    db,
    keys: new ApiKeys(db),
    usage: new UsageLog(db),
    responses: new ResponseStore(db, opts.responseRetentionDays ?? RESPONSE_RETENTION_DEFAULT_DAYS),
    close: () => {
      if (db.isOpen) db.close();
    },
  };
}
