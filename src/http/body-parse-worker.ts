/**
 * Thread entry of the body parser (`BodyParseThread`): parses large request bodies at a lowered
 * priority, so a megabyte body delays neither the main thread, which writes every stream's chunks,
 * nor the forward pass's threads.
 */
import { parentPort } from "node:worker_threads";
import { lowerThreadPriority } from "../util/thread-priority.ts";
import type { ReadyMessage as WorkerReady } from "../util/worker-calls.ts";
import { type ParsedBody, parseJsonText } from "./parse-json.ts";

export type ParseJob = { id: number; text: string };
export type ParseReply = { id: number } & ParsedBody;
export type ReadyMessage = WorkerReady<{ nice: number | undefined }>;

const port = parentPort!;
port.postMessage({ ready: { nice: lowerThreadPriority() } } satisfies ReadyMessage);
port.on("message", (job: ParseJob) => {
  port.postMessage({ id: job.id, ...parseJsonText(job.text) } satisfies ParseReply);
});
