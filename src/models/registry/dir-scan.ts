/**
 * One model directory scanned: its settings and weights (`model-dir.ts`), the start-time file check
 * (`model-files.ts`) and its checkpoints, with the stamp that says when it must be read again and
 * the revision of each directory it serves. Runs on the server's thread at start and on a thread
 * of its own while serving (`scan-thread.ts`): checking a changed directory parses its
 * tokenizer.json, a quarter of a second for a 150k-token vocabulary, which no stream should wait on.
 */
import { statSync } from "node:fs";
import { join } from "node:path";
import { MODEL_META_FILE } from "../fetch/model-meta.ts";
import { CHECKPOINTS_DIR, scanCheckpoints } from "./checkpoint-dir.ts";
import { type ModelDirResult, readModelDir } from "./model-dir.ts";
import { modelFilesProblem } from "./model-files.ts";
import type { Checkpoint } from "./types.ts";

export interface ScanOptions {
  checkFiles?: boolean;
}

/** One model directory as last scanned, reused while its stamp holds. */
export interface ScannedDir {
  stamp: string;
  found: ModelDirResult;
  /** The start-time file check's finding (checkFiles), when the directory holds a model. */
  problem: string | undefined;
  checkpoints: Checkpoint[];
  warnings: string[];
  /** Revision of each served directory (the model's and its checkpoints'). */
  revisions: Map<string, string>;
}

/**
 * Which directory a path is (inode and birth time: a directory swapped in at the same path, or
 * made after another was deleted and its inode reused, differs), or undefined when it is gone.
 */
export function revisionOf(path: string): string | undefined {
  try {
    const st = statSync(path);
    return `${st.ino}.${st.birthtimeMs}`;
  } catch {
    return undefined;
  }
}

/**
 * What a model directory is on disk, as far as a scan reads it: the directory, its settings and
 * its onnx/ and checkpoints/ directories (renaming a model, a format or a checkpoint in or out
 * changes one of them). A file rewritten in place changes none: ortserve writes new files beside
 * and renames them in.
 */
export function stampOf(dir: string): string {
  return [dir, join(dir, MODEL_META_FILE), join(dir, "onnx"), join(dir, CHECKPOINTS_DIR)]
    .map((path) => {
      try {
        const st = statSync(path);
        return `${st.ino}:${st.mtimeMs}`;
      } catch {
        return "-";
      }
    })
    .join(",");
}

export function scanDir(dir: string, name: string, opts: ScanOptions): ScannedDir {
  const stamp = stampOf(dir);
  const found = readModelDir(dir, name);
  const scanned: ScannedDir = {
    stamp,
    found,
    problem: undefined,
    checkpoints: [],
    warnings: [],
    revisions: new Map(),
  };
  if (!found.ok) return scanned;
  scanned.problem = opts.checkFiles ? modelFilesProblem(dir, found.model.format) : undefined;
  if (scanned.problem) return scanned;
  const { checkpoints, warnings } = scanCheckpoints(dir, found.model.format, opts);
  scanned.checkpoints = checkpoints;
  scanned.warnings = [...found.warnings, ...warnings];
  for (const path of [dir, ...checkpoints.map((c) => c.dir)]) {
    const revision = revisionOf(path);
    if (revision !== undefined) scanned.revisions.set(path, revision);
  }
  return scanned;
}
