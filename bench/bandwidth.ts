/**
 * The machine's memory read bandwidth with all threads: each worker thread scans its share of a
 * buffer far larger than the caches for a byte that is not there (Buffer.indexOf, i.e. the C
 * library's vectorised memchr), all threads at once, and the best of several passes counts.
 * Decode reads every weight once per step, so weight bytes / bandwidth is the single-stream
 * time floor (the roofline the decode figures are compared with).
 */
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import { median, nowSeconds } from "./stats.ts";

const SCANNER = `
const { parentPort, workerData } = require("node:worker_threads");
const view = Buffer.from(workerData.buffer, workerData.start, workerData.length);
parentPort.on("message", () => parentPort.postMessage(view.indexOf(7)));
`;

/** Bytes per second read by `threads` threads at once (median of `runs` passes over `bytes`). */
export async function readBandwidth(
  threads = availableParallelism(),
  bytes = 1 << 30,
  runs = 7,
): Promise<number> {
  const buffer = new SharedArrayBuffer(bytes);
  new Uint8Array(buffer).fill(1);
  const share = Math.floor(bytes / threads);
  const workers = Array.from(
    { length: threads },
    (_, i) => new Worker(SCANNER, { eval: true, workerData: { buffer, start: i * share, length: share } }),
  );
  const pass = () =>
    Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve, reject) => {
            w.once("message", (found: number) =>
              found === -1 ? resolve() : reject(new Error("scan found a byte that was never written")),
            );
            w.postMessage(0);
          }),
      ),
    );
  try {
    await pass();
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const t0 = nowSeconds();
      await pass();
      times.push(nowSeconds() - t0);
    }
    return (share * threads) / median(times);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

if (import.meta.main) {
  for (const threads of [1, availableParallelism()]) {
    const bw = await readBandwidth(threads);
    console.log(`read bandwidth, ${threads} thread(s): ${(bw / 1e9).toFixed(1)} GB/s`);
  }
}
