/**
 * The usage writer's thread (see usage-writer.ts): its own connection to the database, group
 * commits of usage rows, the write probe and keys' last-used times. A commit waits for fsync,
 * which a busy disk can hold for a tenth of a second or more; here that waits on no one's stream.
 */
import { parentPort, workerData } from "node:worker_threads";
import { ApiKeys } from "./api-keys.ts";
import { openDatabase } from "./db.ts";
import { UsageLog, type UsageRecord } from "./usage.ts";

export type WriterJob =
  | { kind: "usage"; id: number; record: UsageRecord }
  | { kind: "probe"; id: number }
  | { kind: "touch"; keyId: number };

export type WriterReply =
  | { id: number; ok: true; writable?: boolean }
  | { id: number; ok: false; error: string };

export type WriterReady = { ready: true } | { failed: string };

const port = parentPort!;
let log: UsageLog;
let keys: ApiKeys;
try {
  const db = openDatabase(workerData as string);
  log = new UsageLog(db);
  keys = new ApiKeys(db);
  port.postMessage({ ready: true } satisfies WriterReady);
} catch (err) {
  port.postMessage({ failed: String(err) } satisfies WriterReady);
  process.exit(1);
}

port.on("message", (job: WriterJob) => {
  switch (job.kind) {
    case "usage":
      // Rows arriving in one turn of this thread's loop share one commit (UsageLog.commitUsage).
      log.commitUsage(job.record).then(
        () => port.postMessage({ id: job.id, ok: true } satisfies WriterReply),
        (err: unknown) =>
          port.postMessage({ id: job.id, ok: false, error: String(err) } satisfies WriterReply),
      );
      break;
    case "probe":
      port.postMessage({ id: job.id, ok: true, writable: log.canWrite() } satisfies WriterReply);
      break;
    case "touch":
      keys.touchLastUsed(job.keyId);
      break;
  }
});
