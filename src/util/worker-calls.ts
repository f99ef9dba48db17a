/**
 * Calls to a worker thread that first says it is ready (`{ ready }` or `{ failed }`) and then
 * answers each job, tagged with the job's id, in its own time. The thread starts on first use; one
 * that dies fails the calls it owed and is started again on the next. Idle, it holds no process.
 */
import { Worker } from "node:worker_threads";

export type ReadyMessage<R> = { ready: R } | { failed: string };

type Pending<Reply> = { resolve(reply: Reply): void; reject(err: Error): void };

export class WorkerCalls<R, Reply extends { id: number }> {
  private worker: Worker | undefined;
  private ready: Promise<R> | undefined;
  private readonly pending = new Map<number, Pending<Reply>>();
  private nextId = 0;
  private readonly url: URL;
  private readonly workerData: unknown;
  /** Names the thread in errors ("tokenizer", "usage writer"). */
  private readonly name: string;

  constructor(url: URL, workerData: unknown, name: string) {
    this.url = url;
    this.workerData = workerData;
    this.name = name;
  }

  /** The thread's ready message (starts it if needed). */
  start(): Promise<R> {
    if (this.ready) return this.ready;
    const worker = new Worker(this.url, { workerData: this.workerData });
    worker.unref();
    this.worker = worker;
    this.ready = new Promise<R>((resolve, reject) => {
      worker.once("message", (m: ReadyMessage<R>) => {
        if ("failed" in m) reject(new Error(`${this.name} failed to start: ${m.failed}`));
        else resolve(m.ready);
      });
      worker.on("message", (m: Reply | ReadyMessage<R>) => {
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
      worker.once("exit", (code) => lost(new Error(`${this.name} thread exited with code ${code}`)));
    });
    this.ready.catch(() => {});
    return this.ready;
  }

  /** Posts `job` with a fresh id and resolves with the reply carrying it. */
  async call(job: object): Promise<Reply> {
    await this.start();
    const id = this.nextId++;
    return new Promise<Reply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker!.postMessage({ ...job, id });
    });
  }

  /** Posts a message nothing answers (best effort: dropped if the thread cannot start). */
  post(message: object): void {
    this.start().then(
      () => this.worker?.postMessage(message),
      () => {},
    );
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    this.ready = undefined;
    await w?.terminate();
  }
}
