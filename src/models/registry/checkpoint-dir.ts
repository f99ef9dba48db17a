/**
 * `<model>/checkpoints/<dir>/checkpoint.json` plus that checkpoint's own model files. A checkpoint
 * whose metadata is wrong, or conflicts with another's, is skipped with a warning: one bad
 * directory must never take the server down, nor make a name point at the wrong weights.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { ModelFormat } from "../fetch/model-meta.ts";
import { isDirectoryEntry } from "./dir-entry.ts";
import { modelFilesProblem } from "./model-files.ts";
import type { Checkpoint } from "./types.ts";
import { availableFormats, pickFormat } from "./weights.ts";

export const CHECKPOINTS_DIR = "checkpoints";
export const CHECKPOINT_META_FILE = "checkpoint.json";
/** What checkpoint.json is renamed to when the checkpoint is removed (checkpoint-removal.ts). */
export const REMOVED_META_FILE = "checkpoint.removed.json";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface CheckpointMeta {
  id: string;
  step: number;
  metrics: Record<string, number>;
  created?: number;
}

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Metrics must be a plain object of finite numbers (JSON has no NaN, but hand-made objects might). */
export function metricsProblem(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "must be an object";
  for (const [key, v] of Object.entries(value))
    if (typeof v !== "number" || !Number.isFinite(v)) return `"${key}" is not a finite number`;
  return undefined;
}

/** Validates checkpoint.json's content; throws naming every problem. Ids come back lower-cased. */
export function parseCheckpointMeta(json: unknown): CheckpointMeta {
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new Error("not a JSON object");
  const raw = json as Record<string, unknown>;
  const problems: string[] = [];
  if (typeof raw.id !== "string" || !isUuid(raw.id)) problems.push('"id" must be a UUID');
  if (!Number.isSafeInteger(raw.step) || (raw.step as number) < 0)
    problems.push('"step" must be an integer >= 0');
  const metrics = raw.metrics ?? {};
  const badMetrics = metricsProblem(metrics);
  if (badMetrics) problems.push(`"metrics" ${badMetrics}`);
  const created = raw.created;
  if (created !== undefined && (typeof created !== "number" || !Number.isFinite(created) || created < 0))
    problems.push('"created" must be unix seconds');
  if (problems.length > 0) throw new Error(problems.join("; "));
  const meta: CheckpointMeta = {
    id: (raw.id as string).toLowerCase(),
    step: raw.step as number,
    metrics: metrics as Record<string, number>,
  };
  if (created !== undefined) meta.created = Math.floor(created as number);
  return meta;
}

function readCheckpoint(dir: string, preferred: ModelFormat): Checkpoint {
  const path = join(dir, CHECKPOINT_META_FILE);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new Error(`no ${CHECKPOINT_META_FILE}`);
    throw err;
  }
  const meta = parseCheckpointMeta(JSON.parse(text));
  return {
    id: meta.id,
    step: meta.step,
    metrics: meta.metrics,
    dir,
    created: meta.created ?? Math.floor(statSync(path).mtimeMs / 1000),
    format: pickFormat(availableFormats(dir), preferred),
  };
}

function subdirectories(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => isDirectoryEntry(e) && !e.name.startsWith("."))
    .map((e) => e.name)
    .sort();
}

/** Values that occur more than once. */
function repeated<T>(values: readonly T[]): Set<T> {
  const seen = new Set<T>();
  const twice = new Set<T>();
  for (const v of values) (seen.has(v) ? twice : seen).add(v);
  return twice;
}

/**
 * The valid checkpoints of the model in modelDir, sorted by step. Hidden directories are skipped
 * silently: `checkpoint add` converts into one and renames it when complete. With `checkFiles`
 * (the server's start) each checkpoint's model files get the base model's start-time check: a
 * checkpoint whose weights are corrupt or half-written stays listed (its metadata is valid) but is
 * not servable, with a warning naming the problem.
 */
export function scanCheckpoints(
  modelDir: string,
  preferred: ModelFormat,
  opts: { checkFiles?: boolean } = {},
): { checkpoints: Checkpoint[]; warnings: string[] } {
  const root = join(modelDir, CHECKPOINTS_DIR);
  const warnings: string[] = [];
  let names: string[];
  try {
    names = subdirectories(root);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "ENOENT") warnings.push(`${root}: cannot read checkpoints (${(err as Error).message})`);
    return { checkpoints: [], warnings };
  }
  const parsed: Checkpoint[] = [];
  for (const name of names) {
    const dir = join(root, name);
    // Removed (checkpoint-removal.ts) but not yet deleted: gone for good, without a warning.
    if (existsSync(join(dir, REMOVED_META_FILE)) && !existsSync(join(dir, CHECKPOINT_META_FILE))) continue;
    try {
      parsed.push(readCheckpoint(dir, preferred));
    } catch (err) {
      warnings.push(`${dir}: checkpoint skipped: ${(err as Error).message}`);
    }
  }
  // Neither of two conflicting checkpoints is kept: picking one would be arbitrary.
  const dupIds = repeated(parsed.map((c) => c.id));
  const dupSteps = repeated(parsed.map((c) => c.step));
  const checkpoints: Checkpoint[] = [];
  for (const c of parsed) {
    if (dupIds.has(c.id))
      warnings.push(`${c.dir}: checkpoint skipped: id ${c.id} is used by another checkpoint`);
    else if (dupSteps.has(c.step))
      warnings.push(`${c.dir}: checkpoint skipped: step ${c.step} is used by another checkpoint`);
    else checkpoints.push(c);
  }
  checkpoints.sort((a, b) => a.step - b.step);
  const broken = new Set<Checkpoint>();
  if (opts.checkFiles)
    for (const c of checkpoints) {
      const problem = c.format === undefined ? undefined : modelFilesProblem(c.dir, c.format);
      if (problem === undefined) continue;
      warnings.push(`${c.dir}: checkpoint step ${c.step} not servable: ${problem}`);
      c.format = undefined;
      c.problem = problem;
      broken.add(c);
    }
  const noWeights = checkpoints.filter((c) => c.format === undefined && !broken.has(c));
  if (noWeights.length > 0) {
    const shown = noWeights.slice(0, 10).map((c) => c.step);
    const more = noWeights.length > shown.length ? `, ... (${noWeights.length} in all)` : "";
    warnings.push(`${root}: listed but not servable (no converted weights): step ${shown.join(", ")}${more}`);
  }
  return { checkpoints, warnings };
}
