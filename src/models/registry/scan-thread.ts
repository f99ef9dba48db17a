/**
 * Model directories scanned on a short-lived thread of its own (see dir-scan.ts): the thread reads
 * the directories it is given, posts their scans and ends.
 */
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { type ScannedDir, type ScanOptions, scanDir } from "./dir-scan.ts";

interface ScanJob {
  dirs: { name: string; dir: string }[];
  opts: ScanOptions;
}

/** This module, as the thread runs it: TypeScript from the sources, JavaScript from the build (dist/). */
const SELF = new URL(import.meta.url);

if (!isMainThread && (workerData as { scanThread?: ScanJob } | undefined)?.scanThread) {
  const { dirs, opts } = (workerData as { scanThread: ScanJob }).scanThread;
  parentPort!.postMessage(dirs.map(({ name, dir }) => [name, scanDir(dir, name, opts)] as const));
}

/** The scans of `dirs`, by name, read on a thread of their own. */
export function scanOffThread(dirs: ScanJob["dirs"], opts: ScanOptions): Promise<Map<string, ScannedDir>> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(SELF, { workerData: { scanThread: { dirs, opts } satisfies ScanJob } });
    worker.once("message", (scans: [string, ScannedDir][]) => resolve(new Map(scans)));
    worker.once("error", reject);
    worker.once("exit", (code) =>
      reject(new Error(`the models directory scan thread exited with code ${code}`)),
    );
  });
}
