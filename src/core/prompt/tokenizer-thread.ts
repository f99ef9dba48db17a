/**
 * A model's prompt tokenizer in a thread of its own (`tokenizer-worker.ts`): the engine's thread,
 * which runs the forward passes, only posts the text and waits, so a long or hostile prompt delays
 * no step. Jobs run one at a time in arrival order. A thread that dies fails its pending jobs and
 * is started again on the next one.
 */

import { WorkerCalls } from "../../util/worker-calls.ts";
import type { BoundedIds } from "./bounded-encode.ts";
import type { TokenizeJob, TokenizeReply } from "./tokenizer-worker.ts";

/** The worker module next to this one: TypeScript from the sources, JavaScript from the build (dist/). */
const WORKER = import.meta.url.endsWith(".ts") ? "./tokenizer-worker.ts" : "./tokenizer-worker.js";

export interface TokenizerInfo {
  /** The most bytes one token stands for; undefined when the tokenizer normalizes text. */
  maxBytesPerToken?: number;
  /** Whether prompts are encoded in pieces (and stop once past their limit). */
  sliceable: boolean;
}

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

export class TokenizerThread {
  private readonly calls: WorkerCalls<TokenizerInfo, TokenizeReply>;

  constructor(modelDir: string) {
    this.calls = new WorkerCalls(new URL(WORKER, import.meta.url), modelDir, "tokenizer");
  }

  /** What the tokenizer's vocabulary bounds (starts the thread if needed). */
  info(): Promise<TokenizerInfo> {
    return this.calls.start();
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

  close(): Promise<void> {
    return this.calls.close();
  }

  private async run(job: DistributiveOmit<TokenizeJob, "id">): Promise<TokenizeReply> {
    const reply = await this.calls.call(job);
    if ("error" in reply) throw new Error(`tokenizer failed: ${reply.error}`);
    return reply;
  }
}
