/**
 * Removing a checkpoint from disk, in two steps so no state in between is ever served wrongly:
 * `markRemoved` renames its checkpoint.json to checkpoint.removed.json at once (a scan skips the
 * directory from then on, even after a restart, while the weights stay readable for requests
 * still using them); `deleteCheckpointDir` later moves the directory out of sight (a hidden name)
 * and deletes it.
 */
import { randomUUID } from "node:crypto";
import { renameSync, rmSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { CHECKPOINT_META_FILE, REMOVED_META_FILE } from "./registry/checkpoint-dir.ts";

export function markRemoved(checkpointDir: string): void {
  renameSync(join(checkpointDir, CHECKPOINT_META_FILE), join(checkpointDir, REMOVED_META_FILE));
}

export function deleteCheckpointDir(checkpointDir: string): void {
  const hidden = join(dirname(checkpointDir), `.removed-${basename(checkpointDir)}-${randomUUID()}`);
  renameSync(checkpointDir, hidden);
  rmSync(hidden, { recursive: true, force: true });
}
