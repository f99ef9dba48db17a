/**
 * Large request bodies parsed off the main thread (`body-parse-worker.ts`), one at a time in
 * arrival order. The thread starts on the first large body; one that dies fails the parse it owed,
 * and the caller parses on its own thread instead.
 */
import { WorkerCalls } from "../util/worker-calls.ts";
import type { ParseReply } from "./body-parse-worker.ts";
import type { ParsedBody } from "./parse-json.ts";

/** The worker module next to this one: TypeScript from the sources, JavaScript from the build (dist/). */
const WORKER = import.meta.url.endsWith(".ts") ? "./body-parse-worker.ts" : "./body-parse-worker.js";

export class BodyParseThread {
  private readonly calls = new WorkerCalls<{ nice: number | undefined }, ParseReply>(
    new URL(WORKER, import.meta.url),
    undefined,
    "body parser",
  );

  async parse(text: string): Promise<ParsedBody> {
    const { id: _, ...parsed } = await this.calls.call({ text });
    return parsed;
  }

  /** The thread's nice value once started (undefined where threads have none of their own). */
  async nice(): Promise<number | undefined> {
    return (await this.calls.start()).nice;
  }

  close(): Promise<void> {
    return this.calls.close();
  }
}
