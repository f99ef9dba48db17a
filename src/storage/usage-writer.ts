/**
 * Usage rows (and keys' last-used times, and stored responses' writes) written from a thread of
 * their own (usage-writer-worker.ts). The server's main
 * thread writes every stream's chunks; a commit there would hold all of them for as long as fsync
 * takes, and on a busy disk (a checkpoint import, a model pull) that is 60–170 ms, measured.
 * Rows still resolve only once committed to disk, so a response still completes after its row.
 * A thread that dies fails its pending rows and is started again on the next one.
 */
import { Worker } from "node:worker_threads";
import type { UsageStore } from "../http/usage.ts";
import type { ResponseRow, ResponseWrites } from "./responses.ts";
import type { UsageRecord } from "./usage.ts";
import type { WriterJob, WriterReady, WriterReply } from "./usage-writer-worker.ts";

/** The worker module next to this one: TypeScript from the sources, JavaScript from the build (dist/). */
const WORKER = import.meta.url.endsWith(".ts") ? "./usage-writer-worker.ts" : "./usage-writer-worker.js";

type Pending = { resolve(reply: WriterReply): void; reject(err: Error): void };
/** The jobs that are answered: they carry an id. */
type Call =
  | { kind: "usage"; record: UsageRecord }
  | { kind: "probe" }
  | { kind: "response-insert"; row: ResponseRow }
  | { kind: "response-delete"; responseId: string; keyId: number | null; now: string }
  | { kind: "response-purge"; now: string };

export class UsageWriter implements UsageStore, ResponseWrites {
  private readonly path: string;
  private worker: Worker | undefined;
  private ready: Promise<void> | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;

  /** `path`: the database file (not ":memory:", which another connection cannot see). */
  constructor(path: string) {
    this.path = path;
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
    this.start().then(
      () => this.worker?.postMessage({ kind: "touch", keyId } satisfies WriterJob),
      () => {},
    );
  }

  /** Starts the thread now, so a database it cannot open fails the server's start, not a request. */
  open(): Promise<void> {
    return this.start();
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    this.ready = undefined;
    await w?.terminate();
  }

  private async call(job: Call): Promise<WriterReply> {
    await this.start();
    const id = this.nextId++;
    return new Promise<WriterReply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker!.postMessage({ ...job, id } as WriterJob);
    });
  }

  private start(): Promise<void> {
    if (this.ready) return this.ready;
    const worker = new Worker(new URL(WORKER, import.meta.url), { workerData: this.path });
    // Pending rows hold requests open, and requests hold the process; idle, the thread holds nothing.
    worker.unref();
    this.worker = worker;
    this.ready = new Promise<void>((resolve, reject) => {
      worker.once("message", (m: WriterReady) => {
        if ("failed" in m) reject(new Error(`usage writer failed to open the database: ${m.failed}`));
        else resolve();
      });
      worker.on("message", (m: WriterReply | WriterReady) => {
        if (!("id" in m)) return;
        const p = this.pending.get(m.id);
        this.pending.delete(m.id);
        p?.resolve(m);
      });
      const lost = (err: Error) => {
        if (this.worker === worker) {
          this.worker = undefined;
          this.ready = undefined;
        }
        reject(err);
        for (const p of this.pending.values()) p.reject(err);
        this.pending.clear();
      };
      worker.once("error", lost);
      worker.once("exit", (code) => lost(new Error(`usage writer thread exited with code ${code}`)));
    });
    this.ready.catch(() => {});
    return this.ready;
  }
}
