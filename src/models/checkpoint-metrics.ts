/** Adds metrics to a checkpoint's checkpoint.json (what the listing returns), atomically. */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CHECKPOINT_META_FILE, metricsProblem, parseCheckpointMeta } from "./registry/checkpoint-dir.ts";

export function mergeCheckpointMetrics(checkpointDir: string, metrics: Record<string, number>): void {
  const problem = metricsProblem(metrics);
  if (problem) throw new Error(`metrics ${problem}`);
  const path = join(checkpointDir, CHECKPOINT_META_FILE);
  const raw = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  const meta = parseCheckpointMeta(raw);
  const next = { ...raw, metrics: { ...meta.metrics, ...metrics } };
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(next, null, 2)}\n`);
  renameSync(tmp, path);
}
