/** A worker thread's V8 heap, as /metrics reports it: every worker thread is its own isolate. */
import type { Worker } from "node:worker_threads";

export interface ThreadHeap {
  usedBytes: number;
  totalBytes: number;
}

/** Bytes in use and committed; zeros for a thread that is gone or does not answer. */
export async function threadHeap(thread: Worker | undefined): Promise<ThreadHeap> {
  try {
    const h = await thread?.getHeapStatistics();
    return { usedBytes: h?.used_heap_size ?? 0, totalBytes: h?.total_heap_size ?? 0 };
  } catch {
    return { usedBytes: 0, totalBytes: 0 };
  }
}
