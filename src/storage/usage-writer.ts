/**
 * Usage rows (and keys' last-used times, and stored responses' writes) written from a thread of
 * their own (usage-writer-worker.ts). The server's main
 * thread writes every stream's chunks; a commit there would hold all of them for as long as fsync
 * takes, and on a busy disk (a checkpoint import, a model pull) that is 60–170 ms, measured.
 * Rows still resolve only once committed to disk, so a response still completes after its row.
 * A thread that dies fails its pending rows and is started again on the next one.
 */
import type { UsageStore } from "../http/usage.ts";
import { WorkerCalls } from "../util/worker-calls.ts";
import type { ResponseRow, ResponseWrites } from "./responses.ts";
import type { UsageRecord } from "./usage.ts";
import type { WriterJob, WriterReply } from "./usage-writer-worker.ts";

/** The worker module next to this one: TypeScript from the sources, JavaScript from the build (dist/). */
const WORKER = import.meta.url.endsWith(".ts") ? "./usage-writer-worker.ts" : "./usage-writer-worker.js";

/** The jobs that are answered: they carry an id. */
type Call =
  | { kind: "usage"; record: UsageRecord }
  | { kind: "probe" }
  | { kind: "response-insert"; row: ResponseRow }
  | { kind: "response-delete"; responseId: string; keyId: number | null; now: string }
  | { kind: "response-purge"; now: string };

export class UsageWriter implements UsageStore, ResponseWrites {
  private readonly calls: WorkerCalls<true, WriterReply>;

  /** `path`: the database file (not ":memory:", which another connection cannot see). */
  constructor(path: string) {
    this.calls = new WorkerCalls(new URL(WORKER, import.meta.url), path, "usage writer");
  }

  async commitUsage(record: UsageRecord): Promise<void> {
    const reply = await this.call({ kind: "usage", record });
    if (!reply.ok) throw new Error(reply.error);
  }

  async canWrite(): Promise<boolean> {
    try {
      const reply = await this.call({ kind: "probe" });
      return reply.ok && reply.writable === true;
    } catch {
      return false;
    }
  }

  async insertResponse(row: ResponseRow): Promise<void> {
    await this.changed({ kind: "response-insert", row });
  }

  async deleteResponse(responseId: string, keyId: number | null, now: string): Promise<boolean> {
    return (await this.changed({ kind: "response-delete", responseId, keyId, now })) > 0;
  }

  purgeResponses(now: string): Promise<number> {
    return this.changed({ kind: "response-purge", now });
  }

  /** A write's count of changed rows; its failure thrown. */
  private async changed(job: Call): Promise<number> {
    const reply = await this.call(job);
    if (!reply.ok) throw new Error(reply.error);
    return reply.count ?? 0;
  }

  /** A key's last-used time (best effort, nothing waits for it). */
  touchKey(keyId: number): void {
    this.calls.post({ kind: "touch", keyId } satisfies WriterJob);
  }

  /** Starts the thread now, so a database it cannot open fails the server's start, not a request. */
  async open(): Promise<void> {
    await this.calls.start();
  }

  close(): Promise<void> {
    return this.calls.close();
  }

  private call(job: Call): Promise<WriterReply> {
    return this.calls.call(job);
  }
}
