/** One open database with its key and usage stores: what the server and the CLI hold. */
import type { DatabaseSync } from "node:sqlite";
import { ApiKeys } from "./api-keys.ts";
import { dbPath, openDatabase } from "./db.ts";
import { UsageLog } from "./usage.ts";

export interface Storage {
  path: string;
  db: DatabaseSync;
  keys: ApiKeys;
  usage: UsageLog;
  close(): void;
}

/** Opens `path` (default: dbPath(), i.e. ORTSERVE_DB or <repo>/.cache/ortserve.db). */
export function openStorage(path: string = dbPath()): Storage {
  const db = openDatabase(path);
  return {
    path,
    db,
    keys: new ApiKeys(db),
    usage: new UsageLog(db),
    close: () => {
      if (db.isOpen) db.close();
    },
  };
}
