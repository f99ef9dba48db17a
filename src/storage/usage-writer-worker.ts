/**
 * The usage writer's thread (see usage-writer.ts): its own connection to the database, group
 * commits of usage rows, the write probe, keys' last-used times and stored responses' writes. A commit waits for fsync,
 * which a busy disk can hold for a tenth of a second or more; here that waits on no one's stream.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { ReadyMessage } from "../util/worker-calls.ts";
import { ApiKeys } from "./api-keys.ts";
import { openDatabase } from "./db.ts";
import { type ResponseRow, ResponseTable } from "./responses.ts";
import { UsageLog, type UsageRecord } from "./usage.ts";

export type WriterJob =
  | { kind: "usage"; id: number; record: UsageRecord }
  | { kind: "probe"; id: number }
  | { kind: "touch"; keyId: number }
  | { kind: "response-insert"; id: number; row: ResponseRow }
  | { kind: "response-delete"; id: number; responseId: string; keyId: number | null; now: string }
  | { kind: "response-purge"; id: number; now: string };

export type WriterReply =
  | { id: number; ok: true; writable?: boolean; count?: number }
  | { id: number; ok: false; error: string };

export type WriterReady = ReadyMessage<true>;

const port = parentPort!;
let log: UsageLog;
let keys: ApiKeys;
let responses: ResponseTable;
try {
  const db = openDatabase(workerData as string);
  log = new UsageLog(db);
  keys = new ApiKeys(db);
  responses = new ResponseTable(db);
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
    default:
      port.postMessage(responseWrite(job));
  }
});

/** A stored response's write, answered with the rows it changed (or its error). */
function responseWrite(
  job: Extract<WriterJob, { kind: "response-insert" | "response-delete" | "response-purge" }>,
): WriterReply {
  try {
    let count: number;
    if (job.kind === "response-insert") {
      responses.insert(job.row);
      count = 1;
    } else if (job.kind === "response-delete")
      count = Number(responses.delete(job.responseId, job.keyId, job.now));
    else count = responses.purge(job.now);
    return { id: job.id, ok: true, count };
  } catch (err) {
    return { id: job.id, ok: false, error: String(err) };
  }
}
