/**
 * What a training run directory holds for ortserve: its checkpoints — Hugging Face Trainer
 * `checkpoint-<step>/` folders with safetensors weights, and GGUF files named by step
 * (`step-<n>.gguf`, `checkpoint-<n>.gguf`) — and each step's metrics from trainer_state.json.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

export interface RunCheckpoint {
  step: number;
  kind: "safetensors" | "gguf";
  /** The checkpoint folder (safetensors) or the GGUF file. */
  path: string;
}

const TRAINER_DIR = /^checkpoint-(\d+)$/;
const GGUF_FILE = /(?:^|[-_.])(?:step|checkpoint)[-_]?(\d+)\.gguf$/i;

/** The run's checkpoints by step; throws when two name the same step. */
export function discoverCheckpoints(runDir: string): RunCheckpoint[] {
  const found: RunCheckpoint[] = [];
  for (const name of readdirSync(runDir).sort()) {
    const path = join(runDir, name);
    const dirMatch = TRAINER_DIR.exec(name);
    if (dirMatch && statSync(path).isDirectory()) {
      if (readdirSync(path).some((f) => f.endsWith(".safetensors")))
        found.push({ step: Number(dirMatch[1]), kind: "safetensors", path });
      continue;
    }
    const fileMatch = GGUF_FILE.exec(name);
    if (fileMatch && statSync(path).isFile()) found.push({ step: Number(fileMatch[1]), kind: "gguf", path });
  }
  const steps = new Set<number>();
  for (const c of found) {
    if (!Number.isSafeInteger(c.step)) throw new Error(`${c.path}: step ${c.step} is too large`);
    if (steps.has(c.step)) throw new Error(`${runDir}: two checkpoints for step ${c.step}`);
    steps.add(c.step);
  }
  return found.sort((a, b) => a.step - b.step);
}

interface TrainerState {
  log_history?: Record<string, unknown>[];
}

/**
 * The metrics logged at `step` (loss, eval_loss, learning_rate, epoch, grad_norm, ...): every
 * numeric value of trainer_state.json's log_history entries for that step, from the checkpoint's
 * own trainer_state.json, else the run's.
 */
export function trainerMetrics(runDir: string, checkpoint: RunCheckpoint): Record<string, number> {
  const candidates = [
    ...(checkpoint.kind === "safetensors" ? [join(checkpoint.path, "trainer_state.json")] : []),
    join(runDir, "trainer_state.json"),
  ];
  const path = candidates.find((p) => existsSync(p));
  if (!path) return {};
  const state = JSON.parse(readFileSync(path, "utf8")) as TrainerState;
  const metrics: Record<string, number> = {};
  for (const entry of state.log_history ?? []) {
    if (entry.step !== checkpoint.step) continue;
    for (const [key, value] of Object.entries(entry))
      if (key !== "step" && typeof value === "number" && Number.isFinite(value)) metrics[key] = value;
  }
  return metrics;
}
