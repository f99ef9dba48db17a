import { addCheckpoint, servedModel } from "../../models/checkpoint-install.ts";
import { deleteCheckpointDir, markRemoved } from "../../models/checkpoint-removal.ts";
import { metricsProblem } from "../../models/registry/checkpoint-dir.ts";
import { type Checkpoint, ModelRegistry } from "../../models/registry.ts";
import { modelsDir } from "../../util/paths.ts";
import { UsageError } from "../../util/usage-error.ts";
import { parseCommandLine, parseFormat } from "../args.ts";

export const summary = "add a GGUF as a model checkpoint, list a model's checkpoints, or remove some";

export const usage = `Usage: ortserve checkpoint add <model_id> <file.gguf> --step <n> [options]
       ortserve checkpoint list <model_id> [options]
       ortserve checkpoint remove <model_id> <step>... [options]
       ortserve checkpoint import <run_dir> --model <model_id> [options]

add   converts the GGUF into <models-dir>/<model>/checkpoints/step-<n>/ with a
      checkpoint.json holding a new UUID, the step and the metrics. Requests
      then name it "<model_id>:step<n>"; "<model_id>" alone means the latest.
list  prints the model's checkpoints by step.
import makes every checkpoint of a training run a checkpoint of the model:
      Trainer checkpoint-<step>/ folders (safetensors; llama) and GGUF files
      named step-<n>.gguf or checkpoint-<n>.gguf, with the metrics
      trainer_state.json logged at that step. Steps the model has are skipped.
remove deletes the checkpoints of those steps from disk (a step without one
      is reported and makes the exit status 1). For a running server, use
      DELETE /v1/preview/models/<model_id>/checkpoints instead: it keeps serving
      what it listed at start, and waits for requests using a checkpoint.

Options:
  --step <n>           training step, an integer >= 0 not used yet (add)
  --metrics <json>     e.g. '{"loss":1.2}': numbers reported with the checkpoint (add)
  --model <id>         the model to import into (import)
  --format q4|fp32     ONNX flavour to produce (add, import; default: the model's format)
  --json               print the list as JSON (list)
  --models-dir <dir>   models directory (default: $ORTSERVE_MODELS_DIR or <repo>/models)
  -h, --help           show this help
`;

function parseStep(value: string | undefined, name = "--step"): number {
  if (value === undefined) throw new UsageError(`${name} is required`);
  const step = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(step))
    throw new UsageError(`${name} must be an integer >= 0 (got "${value}")`);
  return step;
}

export interface RemoveCheckpointsResult {
  removed: Checkpoint[];
  notFound: number[];
}

/** Deletes a model's checkpoints of `steps` from disk (no server involved). */
export function removeCheckpoints(
  modelId: string,
  steps: readonly number[],
  dir?: string,
): RemoveCheckpointsResult {
  const registry = ModelRegistry.load(modelsDir(dir));
  servedModel(registry, modelId);
  const { removed, notFound } = registry.removeCheckpoints(modelId, steps);
  for (const c of removed) {
    markRemoved(c.dir);
    deleteCheckpointDir(c.dir);
  }
  return { removed, notFound };
}

function parseMetrics(value: string | undefined): Record<string, number> {
  if (value === undefined) return {};
  let metrics: unknown;
  try {
    metrics = JSON.parse(value);
  } catch {
    throw new UsageError(`--metrics must be a JSON object (got ${value})`);
  }
  const problem = metricsProblem(metrics);
  if (problem) throw new UsageError(`--metrics ${problem}`);
  return metrics as Record<string, number>;
}

function formatList(checkpoints: readonly Checkpoint[]): string {
  if (checkpoints.length === 0) return "no checkpoints\n";
  const rows = checkpoints.map((c) => [
    String(c.step),
    c.id,
    new Date(c.created * 1000).toISOString(),
    c.format ?? "-",
    JSON.stringify(c.metrics),
  ]);
  const all = [["STEP", "ID", "CREATED", "FORMAT", "METRICS"], ...rows];
  const widths = all[0]!.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  return all
    .map(
      (r) =>
        `${r
          .map((cell, i) => cell.padEnd(widths[i]!))
          .join("  ")
          .trimEnd()}\n`,
    )
    .join("");
}

function listCommand(modelId: string, dir: string | undefined, json: boolean): void {
  const registry = ModelRegistry.load(modelsDir(dir));
  const model = servedModel(registry, modelId);
  // Warnings start with the path they concern.
  for (const w of registry.warnings) if (w.startsWith(model.dir)) process.stderr.write(`warning: ${w}\n`);
  if (json) {
    const items = model.checkpoints.map(({ id, step, metrics, created, format }) => ({
      id,
      step,
      metrics,
      created,
      format: format ?? null,
    }));
    process.stdout.write(`${JSON.stringify(items, null, 2)}\n`);
  } else {
    process.stdout.write(formatList(model.checkpoints));
  }
}

export async function run(argv: string[]): Promise<void> {
  const { values, positionals } = parseCommandLine({
    args: argv,
    allowPositionals: true,
    options: {
      step: { type: "string" },
      metrics: { type: "string" },
      format: { type: "string" },
      json: { type: "boolean" },
      model: { type: "string" },
      "models-dir": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  const [sub, ...rest] = positionals;
  if (sub === "add") {
    if (rest.length !== 2) throw new UsageError("add expects <model_id> and <file.gguf>");
    if (values.json) throw new UsageError("--json applies to list");
    const checkpoint = await addCheckpoint({
      modelId: rest[0]!,
      ggufPath: rest[1]!,
      step: parseStep(values.step),
      metrics: parseMetrics(values.metrics),
      format: values.format === undefined ? undefined : parseFormat(values.format, "q4"),
      modelsDir: values["models-dir"],
    });
    process.stdout.write(
      `added checkpoint ${checkpoint.id} (step ${checkpoint.step}) in ${checkpoint.dir}\n` +
        `request it as model "${rest[0]}:step${checkpoint.step}"\n`,
    );
    return;
  }
  if (sub === "list") {
    if (rest.length !== 1) throw new UsageError("list expects <model_id>");
    for (const name of ["step", "metrics", "format"] as const)
      if (values[name] !== undefined) throw new UsageError(`--${name} applies to add`);
    listCommand(rest[0]!, values["models-dir"], values.json ?? false);
    return;
  }
  if (sub === "import") {
    if (rest.length !== 1) throw new UsageError("import expects <run_dir>");
    if (values.model === undefined) throw new UsageError("import needs --model <model_id>");
    for (const name of ["step", "metrics", "json"] as const)
      if (values[name] !== undefined) throw new UsageError(`--${name} does not apply to import`);
    const { importTrainingRun } = await import("./checkpoint-import.ts");
    const result = await importTrainingRun({
      runDir: rest[0]!,
      modelId: values.model,
      format: values.format === undefined ? undefined : parseFormat(values.format, "q4"),
      modelsDir: values["models-dir"],
      log: (line) => process.stdout.write(`${line}\n`),
    });
    process.stdout.write(
      `imported ${result.imported.length} checkpoint(s), ${result.skipped.length} already present; request them as "${values.model}:step<n>"\n`,
    );
    return;
  }
  if (sub === "remove") {
    if (rest.length < 2) throw new UsageError("remove expects <model_id> and at least one step");
    for (const name of ["step", "metrics", "format", "json"] as const)
      if (values[name] !== undefined) throw new UsageError(`--${name} does not apply to remove`);
    const steps = rest.slice(1).map((v) => parseStep(v, "a step"));
    const { removed, notFound } = removeCheckpoints(rest[0]!, steps, values["models-dir"]);
    for (const c of removed) process.stdout.write(`removed checkpoint ${c.id} (step ${c.step})\n`);
    if (notFound.length > 0) {
      process.stderr.write(`no checkpoint for step ${notFound.join(", ")}\n`);
      process.exitCode = 1;
    }
    return;
  }
  throw new UsageError(
    sub === undefined ? "expected add, list, import or remove" : `unknown subcommand "${sub}"`,
  );
}
