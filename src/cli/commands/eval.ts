/**
 * `ortserve eval`: evaluate a model's checkpoints on a JSONL dataset in-process (the engine the
 * server runs), write each checkpoint's metrics into its checkpoint.json, and report them as a
 * table and an SVG chart against step. Results are kept per item, so a re-run resumes.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, extname, join, resolve } from "node:path";
import { UsageError } from "../../util/usage-error.ts";
import { parseCommandLine, parsePositiveInt } from "../args.ts";

export const summary = "evaluate a model's checkpoints on a JSONL dataset; metrics go into the listing";

const DEFAULTS = { checkpoints: "all", maxTokens: 64, concurrency: 8 };

export const usage = `Usage: ortserve eval --model <model_id> --data <file.jsonl> [options]

Each line of the dataset is an item: {"prompt": "..."} or {"messages": [...]}, with
{"answer": "..."} (scored by exact_match and contains on the greedy output) or
{"choices": [...], "answer": <index or text>} (mc_accuracy: the choice with the highest
log-likelihood), or {"schema": {...}} (json_valid: the greedy output parses as JSON and
validates against that JSON Schema; with "constrained": true, or --constrained, it is
generated with the schema enforced, and an output cut by --max-tokens counts as invalid).
Each checkpoint's means are written into its checkpoint.json as
"<dataset>/<metric>" (a running server shows them after a restart); the report goes to
<out>/report.md and <out>/metrics.svg, per-item results to <out>/<dataset>-<hash>.jsonl,
from which an interrupted run resumes.

Options:
  --model <id>             the model whose checkpoints to evaluate
  --data <file.jsonl>      the dataset
  --checkpoints <which>    all, latest, or steps such as 100,200 (default: ${DEFAULTS.checkpoints};
                           a model without checkpoints is evaluated on its own weights)
  --max-tokens <n>         most tokens generated per answer item (default: ${DEFAULTS.maxTokens})
  --constrained            generate schema items with their schema enforced, unless an item
                           says "constrained": false
  --concurrency <n>        items in flight at once; the engine batches them (default: ${DEFAULTS.concurrency})
  --out <dir>              report directory (default: eval-<model_id>)
  --models-dir <dir>       models directory (default: $ORTSERVE_MODELS_DIR or <repo>/models)
  -h, --help               show this help
`;

export async function run(argv: string[]): Promise<void> {
  const { values } = parseCommandLine({
    args: argv,
    options: {
      model: { type: "string" },
      data: { type: "string" },
      checkpoints: { type: "string" },
      "max-tokens": { type: "string" },
      concurrency: { type: "string" },
      constrained: { type: "boolean" },
      out: { type: "string" },
      "models-dir": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  if (!values.model) throw new UsageError("--model is required");
  if (!values.data) throw new UsageError("--data is required");
  const text = readFileSync(values.data, "utf8");
  const { parseDataset } = await import("../../eval/dataset.ts");
  let items: ReturnType<typeof parseDataset>;
  try {
    items = parseDataset(text, { constrained: values.constrained });
  } catch (err) {
    throw new UsageError(`${values.data}: ${(err as Error).message}`);
  }
  const report = await evaluateCheckpoints({
    modelId: values.model,
    items,
    datasetName: basename(values.data, extname(values.data)),
    // --constrained changes what schema items generate: its results are kept apart.
    datasetHash: createHash("sha256")
      .update(values.constrained ? `${text}\0constrained` : text)
      .digest("hex")
      .slice(0, 12),
    checkpoints: values.checkpoints ?? DEFAULTS.checkpoints,
    maxTokens: parsePositiveInt("--max-tokens", values["max-tokens"], DEFAULTS.maxTokens),
    concurrency: parsePositiveInt("--concurrency", values.concurrency, DEFAULTS.concurrency),
    outDir: resolve(values.out ?? `eval-${values.model}`),
    modelsDir: values["models-dir"],
  });
  process.stdout.write(`${report.table}\n\nreport: ${report.files.join(", ")}\n`);
}

export interface EvaluateOptions {
  modelId: string;
  items: import("../../eval/dataset.ts").EvalItem[];
  datasetName: string;
  datasetHash: string;
  checkpoints: string;
  maxTokens: number;
  concurrency: number;
  outDir: string;
  modelsDir?: string;
  progressStream?: import("../../util/progress.ts").ProgressStream;
}

/** The evaluation behind `ortserve eval`: runs, writes the metrics and the report; returns the table. */
export async function evaluateCheckpoints(
  opts: EvaluateOptions,
): Promise<{ table: string; files: string[] }> {
  const { Engine } = await import("../../engine/engine.ts");
  const { ModelRegistry } = await import("../../models/registry.ts");
  const { modelsDir } = await import("../../util/paths.ts");
  const { ProgressBar } = await import("../../util/progress.ts");
  const { evalTargets, runEvaluation } = await import("../../eval/run.ts");
  const { ResultStore } = await import("../../eval/results.ts");
  const { reportChart, reportTable } = await import("../../eval/report.ts");
  const { servedModel } = await import("../../models/checkpoint-install.ts");

  const registry = ModelRegistry.load(modelsDir(opts.modelsDir));
  const model = servedModel(registry, opts.modelId);
  let targets: ReturnType<typeof evalTargets>;
  try {
    targets = evalTargets(model, opts.checkpoints);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  mkdirSync(opts.outDir, { recursive: true });
  const store = new ResultStore(join(opts.outDir, `${opts.datasetName}-${opts.datasetHash}.jsonl`));
  const engine = await Engine.open({ registry });
  const bar = new ProgressBar({
    title: `Evaluating ${opts.modelId}`,
    unit: "count",
    stream: opts.progressStream,
  });
  let summaries: Awaited<ReturnType<typeof runEvaluation>>;
  try {
    summaries = await runEvaluation({
      engine,
      targets,
      items: opts.items,
      settings: { maxTokens: opts.maxTokens },
      store,
      concurrency: opts.concurrency,
      metricPrefix: opts.datasetName,
      onProgress: (done, total, label) => bar.update(done, total, label),
    });
    bar.done();
  } catch (err) {
    bar.abort();
    throw err;
  } finally {
    await engine.close();
  }
  const table = reportTable(summaries);
  const files = [join(opts.outDir, "report.md"), store.path];
  writeFileSync(files[0]!, `# ${opts.modelId} on ${opts.datasetName}\n\n${table}\n`);
  const chart = reportChart(summaries, `${opts.modelId} on ${opts.datasetName}`);
  if (chart) {
    files.push(join(opts.outDir, "metrics.svg"));
    writeFileSync(files.at(-1)!, chart);
  }
  return { table, files };
}
