/**
 * The offline-evaluation flow, start to finish, as a user runs it on a fresh clone:
 *
 *   1. a synthetic Hugging Face training run (Trainer checkpoint-<step>/ folders: safetensors
 *      weights of a tiny random llama, config.json, trainer_state.json) — the test fixture;
 *   2. `ortserve checkpoints import` makes each of its checkpoints a checkpoint of a served model;
 *   3. one `ortserve eval` evaluates every checkpoint on a small dataset written here
 *      (exact_match/contains, multiple choice, json_valid with the schema enforced);
 *   4. `ortserve serve`, and the checkpoint listing with the training and evaluation metrics read
 *      through the official openai client;
 *   5. the evaluation's report table and SVG chart;
 *   6. bench/lm-eval.ts: lm-evaluation-harness scoring a task against /v1/completions of the
 *      default model (set up first when missing; the harness installs into .cache when missing).
 *
 *   node bench/training-run-demo.ts [--dir <work dir>] [--skip-lm-eval]
 *
 * The work directory (a new temporary one by default) is kept, so the report can be opened after.
 */
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import OpenAI from "openai";
import { ModelRegistry } from "../src/models/registry.ts";
import { modelsDir, repoRoot } from "../src/util/paths.ts";
import { startServerProcess } from "../test/e2e/server-process.ts";
import { buildSyntheticModel } from "../test/fixtures/synthetic-model.ts";
import { writeTrainingRun } from "../test/fixtures/training-run.ts";

const MODEL = "tiny";
const STEPS = [50, 100, 150];
const DEFAULT_MODEL = "smollm2-135m-instruct";

const { values } = parseArgs({
  options: { dir: { type: "string" }, "skip-lm-eval": { type: "boolean", default: false } },
});
const work = values.dir ?? mkdtempSync(join(tmpdir(), "ortserve-training-run-demo-"));
mkdirSync(work, { recursive: true });
const models = join(work, "models");
const runDir = join(work, "training-run");
const reportDir = join(work, "eval-report");
const dataset = join(work, "demo-set.jsonl");

const say = (line = "") => process.stdout.write(`${line}\n`);
let section = 0;
const heading = (title: string) => say(`\n=== ${++section}. ${title} ===\n`);

/** Runs a command with its stdout and stderr on this process's stdout, in the order written. */
function run(shown: string, cmd: string, args: string[]): Promise<void> {
  say(`$ ${shown}`);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", 1, 1], cwd: repoRoot });
    child.once("error", reject);
    child.once("close", (code) => {
      say(`(${((performance.now() - started) / 1000).toFixed(1)} s)`);
      code === 0 ? resolve() : reject(new Error(`${shown} exited with ${code}`));
    });
  });
}

/** `ortserve <args>` from this checkout (what the package's `ortserve` bin runs once built). */
const ortserve = (...args: string[]) =>
  run(`ortserve ${args.join(" ")}`, process.execPath, [join(repoRoot, "src/cli/main.ts"), ...args]);

function listFiles(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return listFiles(path);
      return [`  ${relative(work, path)}  (${statSync(path).size} bytes)`];
    });
}

async function main(): Promise<void> {
  say(`work directory: ${work}`);

  heading("A synthetic training run (Hugging Face Trainer layout, safetensors)");
  const { modelDir } = await buildSyntheticModel(models, ["fp32"], MODEL);
  writeTrainingRun(runDir, work, modelDir, STEPS);
  say(`served model "${MODEL}" (a tiny random llama) in ${relative(work, modelDir)}; the run:`);
  for (const line of listFiles(runDir)) say(line);
  const state = JSON.parse(
    readFileSync(join(runDir, `checkpoint-${STEPS.at(-1)}`, "trainer_state.json"), "utf8"),
  );
  say(`trainer_state.json log_history of the last checkpoint:\n${JSON.stringify(state.log_history)}`);

  heading("Import the run's checkpoints");
  await ortserve("checkpoints", "import", runDir, "--model", MODEL, "--models-dir", models);

  heading("Evaluate every checkpoint with one command");
  const color = {
    type: "object",
    properties: { color: { enum: ["red", "green", "blue"] } },
    required: ["color"],
    additionalProperties: false,
  };
  const flag = {
    type: "object",
    properties: { ok: { type: "boolean" } },
    required: ["ok"],
    additionalProperties: false,
  };
  const items: Record<string, unknown>[] = [
    { prompt: "the cat", answer: "the" },
    { prompt: "Say hello:", answer: "hello" },
    { prompt: "the", choices: ["he", "at", "in"], answer: 1 },
    { messages: [{ role: "user", content: "hi" }], choices: ["a", "the"], answer: "the" },
    { prompt: "A color as JSON:", schema: color },
    { messages: [{ role: "user", content: "Is it ok? Reply in JSON." }], schema: flag },
    {
      prompt: "A list of numbers as JSON:",
      schema: { type: "array", items: { type: "integer" } },
      constrained: false,
    },
  ];
  writeFileSync(dataset, `${items.map((x) => JSON.stringify(x)).join("\n")}\n`);
  say(`dataset ${relative(work, dataset)}:`);
  say(readFileSync(dataset, "utf8").trimEnd());
  say("(schema items are generated with the schema enforced (--constrained) except the last, which says");
  say(' "constrained": false; the model is random, so only enforced JSON can be expected to validate)\n');
  await ortserve(
    "eval",
    "--model",
    MODEL,
    "--data",
    dataset,
    "--checkpoints",
    "all",
    "--constrained",
    "--max-tokens",
    "24",
    "--out",
    reportDir,
    "--models-dir",
    models,
  );

  const [results] = readdirSync(reportDir).filter((f) => /^demo-set-.*\.jsonl$/.test(f));
  say(`\nthe schema items' greedy outputs (from ${relative(work, join(reportDir, results!))}):`);
  const stepOf = new Map(
    ModelRegistry.load(models)
      .get(MODEL)!
      .checkpoints.map((c) => [c.id, c.step]),
  );
  const stored = readFileSync(join(reportDir, results!), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { target: string; item: number; json_valid?: number; output?: string })
    .sort((a, b) => stepOf.get(a.target)! - stepOf.get(b.target)! || a.item - b.item);
  for (const r of stored) {
    if (r.json_valid === undefined) continue;
    const constrained = items[r.item]!.constrained !== false;
    say(
      `  step ${stepOf.get(r.target)} item ${r.item} (${constrained ? "constrained" : "unconstrained"}): json_valid ${r.json_valid}  ${JSON.stringify(r.output)}`,
    );
  }

  heading("The checkpoint listing through the official openai client");
  const apiKey = `demo-${crypto.randomUUID()}`;
  say(
    `$ ortserve serve --models-dir ${models} --db ${join(work, "ortserve.db")} --port 0  (ORTSERVE_API_KEY set)`,
  );
  const server = await startServerProcess({ modelsDir: models, dbPath: join(work, "ortserve.db"), apiKey });
  try {
    say(`serving on ${server.url}`);
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0 });
    say(`> client.get("/preview/models/${MODEL}/checkpoints")`);
    const listing = await client.get(`/preview/models/${MODEL}/checkpoints`);
    say(JSON.stringify(listing, null, 2));
    say(`> client.completions.create({ model: "${MODEL}:step${STEPS[1]}", prompt: "the", max_tokens: 4 })`);
    const completion = await client.completions.create({
      model: `${MODEL}:step${STEPS[1]}`,
      prompt: "the",
      max_tokens: 4,
    });
    say(JSON.stringify({ model: completion.model, choices: completion.choices, usage: completion.usage }));
  } finally {
    await server.stop();
  }

  heading("The evaluation's report: table and chart");
  const report = join(reportDir, "report.md");
  const chart = join(reportDir, "metrics.svg");
  say(`${report}:\n`);
  say(readFileSync(report, "utf8").trimEnd());
  const svg = readFileSync(chart, "utf8");
  const series = [
    ...new Set([...svg.matchAll(/>(exact_match|contains|mc_accuracy|json_valid)</g)].map((m) => m[1])),
  ];
  say(`\n${chart}: ${svg.length} bytes, an SVG line chart of ${series.join(", ")} against training step`);

  heading("lm-evaluation-harness against /v1/completions");
  if (values["skip-lm-eval"]) {
    say("(skipped: --skip-lm-eval)");
    return;
  }
  if (!existsSync(join(modelsDir(), DEFAULT_MODEL, "config.json"))) await ortserve("setup");
  await run("node bench/lm-eval.ts", process.execPath, [join(repoRoot, "bench/lm-eval.ts")]);
  say(`\nwork directory kept: ${work}`);
}

await main();
