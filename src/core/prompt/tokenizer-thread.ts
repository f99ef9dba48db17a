/**
 * A model's prompt tokenizer in a thread of its own (`tokenizer-worker.ts`): the engine's thread,
 * which runs the forward passes, only posts the text and waits, so a long or hostile prompt delays
 * no step. Jobs run one at a time in arrival order. A thread that dies fails its pending jobs and
 * is started again on the next one.
 */
import { Worker } from "node:worker_threads";
import type { BoundedIds } from "./bounded-encode.ts";
import type { ReadyMessage, TokenizeJob, TokenizeReply } from "./tokenizer-worker.ts";

/** The worker module next to this one: TypeScript from the sources, JavaScript from the build (dist/). */
const WORKER = import.meta.url.endsWith(".ts") ? "./tokenizer-worker.ts" : "./tokenizer-worker.js";

type Pending = { resolve(reply: TokenizeReply): void; reject(err: Error): void };

export interface TokenizerInfo {
  /** The most bytes one token stands for; undefined when the tokenizer normalizes text. */
  maxBytesPerToken?: number;
  /** Whether prompts are encoded in pieces (and stop once past their limit). */
  sliceable: boolean;
}

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

export class TokenizerThread {
  private worker: Worker | undefined;
  private ready: Promise<TokenizerInfo> | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;

  private readonly modelDir: string;

  constructor(modelDir: string) {
    this.modelDir = modelDir;
  }

  /** What the tokenizer's vocabulary bounds (starts the thread if needed). */
  info(): Promise<TokenizerInfo> {
    return this.start();
  }

  /** A prompt's ids, or `exceeded` once it has more than `limit` tokens (see encodeBounded). */
  async prompt(
    text: string,
    addSpecialTokens: boolean,
    limit: number,
    keepLast?: number,
  ): Promise<BoundedIds> {
    const reply = await this.run({ kind: "prompt", text, addSpecialTokens, limit, keepLast });
    return (reply as { result: BoundedIds }).result;
  }

  /** Each text's ids without special tokens. */
  async words(texts: string[]): Promise<number[][]> {
    if (texts.length === 0) return [];
    const reply = await this.run({ kind: "words", texts });
    return (reply as { lists: number[][] }).lists;
  }

  /** The ids' text, special tokens included. */
  async decode(ids: number[]): Promise<string> {
    const reply = await this.run({ kind: "decode", ids });
    return (reply as { text: string }).text;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    this.ready = undefined;
    await w?.terminate();
  }

  private async run(job: DistributiveOmit<TokenizeJob, "id">): Promise<TokenizeReply> {
    await this.start();
    const id = this.nextId++;
    const reply = await new Promise<TokenizeReply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker!.postMessage({ ...job, id });
    });
    if ("error" in reply) throw new Error(`tokenizer failed: ${reply.error}`);
    return reply;
  }

  private start(): Promise<TokenizerInfo> {
    if (this.ready) return this.ready;
    const worker = new Worker(new URL(WORKER, import.meta.url), { workerData: this.modelDir });
    // Only idle time would keep the process alive otherwise; the engine's own work holds it.
    worker.unref();
    this.worker = worker;
    this.ready = new Promise<TokenizerInfo>((resolve, reject) => {
      worker.once("message", (m: ReadyMessage) => {
        if ("failed" in m) reject(new Error(`tokenizer failed to load: ${m.failed}`));
        else resolve(m.ready);
      });
      worker.on("message", (m: TokenizeReply | ReadyMessage) => {
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
      worker.once("exit", (code) => lost(new Error(`tokenizer thread exited with code ${code}`)));
    });
    this.ready.catch(() => {});
    return this.ready;
  }
}
