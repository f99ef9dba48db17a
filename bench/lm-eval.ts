/**
 * lm-evaluation-harness against ortserve's POST /v1/completions: the harness's `local-completions`
 * model scores a small multiple-choice task written here (task YAML + JSONL), and each of its
 * per-choice log-likelihoods is compared with the engine's own scoring (Engine.score) of the same
 * context + continuation strings.
 *
 *   node bench/lm-eval.ts [--model smollm2-135m-instruct] [--batch-size 4]
 *
 * The harness (PyPI `lm_eval[api]`, pinned, plus `transformers` for its tokenizer) is installed
 * once into its own virtualenv under <ORTSERVE_CACHE_DIR or repo/.cache>/lm-eval/. The server runs
 * in this process, so the scoring below uses the very engine the harness talked to.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { loadTransformersTokenizer } from "../src/core/runner/tokenizer.ts";
import { continuationLoglikelihood, type Encode } from "../src/eval/loglikelihood.ts";
import { SERVER_DEFAULTS, startServer } from "../src/server.ts";
import { cacheDir, modelsDir } from "../src/util/paths.ts";

const LM_EVAL = "lm_eval[api]==0.4.13";
// The harness tokenizes requests itself (tokenizer_backend=huggingface); no torch is needed.
const TRANSFORMERS = "transformers==4.57.6";
const TASK = "ortserve_mc";
const log = (line: string) => process.stderr.write(`${line}\n`);

/** A small multiple-choice set: the answer is the index of the right choice. */
const QUESTIONS = [
  { question: "What is the capital of France?", choices: ["Paris", "Berlin", "Madrid", "Rome"], answer: 0 },
  { question: "How many days are in a week?", choices: ["Five", "Six", "Seven", "Ten"], answer: 2 },
  {
    question: "What color is the sky on a clear day?",
    choices: ["Green", "Blue", "Red", "Black"],
    answer: 1,
  },
  { question: "Which animal says 'meow'?", choices: ["A dog", "A cow", "A cat", "A duck"], answer: 2 },
  { question: "What is 2 + 2?", choices: ["3", "4", "5", "22"], answer: 1 },
  {
    question: "Water freezes at what temperature in Celsius?",
    choices: ["0", "50", "100", "-40"],
    answer: 0,
  },
  {
    question: "Which planet do we live on?",
    choices: ["Mars", "Venus", "Jupiter", "Earth"],
    answer: 3,
  },
  { question: "What do bees make?", choices: ["Milk", "Honey", "Silk", "Wool"], answer: 1 },
];

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", 2, 2], env });
    child.once("error", reject);
    child.once("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(" ")} exited with ${code}`)),
    );
  });
}

/** The harness's virtualenv, installed when missing; returns its lm_eval executable. */
async function ensureHarness(): Promise<string> {
  const dir = join(cacheDir(), "lm-eval");
  const venv = join(dir, "venv");
  const marker = join(dir, "installed.txt");
  const bin = join(venv, "bin", "lm_eval");
  const wanted = `${LM_EVAL} ${TRANSFORMERS}`;
  if (existsSync(bin) && existsSync(marker) && readFileSync(marker, "utf8") === wanted) return bin;
  log(`lm-eval: installing ${wanted} into ${venv}`);
  if (!existsSync(join(venv, "bin", "pip"))) await run("python3", ["-m", "venv", venv]);
  await run(join(venv, "bin", "pip"), [
    "install",
    "--disable-pip-version-check",
    "-q",
    LM_EVAL,
    TRANSFORMERS,
  ]);
  writeFileSync(marker, wanted);
  return bin;
}

/** The task's YAML and data in `dir` (the harness reads local JSON through `datasets`). */
function writeTask(dir: string): void {
  const data = join(dir, "questions.jsonl");
  writeFileSync(data, `${QUESTIONS.map((q) => JSON.stringify(q)).join("\n")}\n`);
  writeFileSync(
    join(dir, `${TASK}.yaml`),
    [
      `task: ${TASK}`,
      "dataset_path: json",
      "dataset_kwargs:",
      "  data_files:",
      `    test: ${JSON.stringify(data)}`,
      "test_split: test",
      "output_type: multiple_choice",
      'doc_to_text: "Question: {{question}}\\nAnswer:"',
      "doc_to_choice: choices",
      "doc_to_target: answer",
      "metric_list:",
      "  - metric: acc",
      "    aggregation: mean",
      "    higher_is_better: true",
      "",
    ].join("\n"),
  );
}

function findFiles(dir: string, match: RegExp): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return findFiles(path, match);
    return match.test(name) ? [path] : [];
  });
}

interface Scored {
  doc: number;
  target: number;
  context: string;
  continuation: string;
  harness: number;
}

/** Each (context, continuation) request of the harness's sample log with its log-likelihood. */
function harnessScores(outputDir: string): Scored[] {
  const [samples] = findFiles(outputDir, new RegExp(`^samples_${TASK}_.*\\.jsonl$`));
  if (!samples) throw new Error(`lm_eval wrote no samples file under ${outputDir}`);
  return readFileSync(samples, "utf8")
    .split("\n")
    .filter(Boolean)
    .flatMap((line) => {
      const s = JSON.parse(line) as {
        doc_id: number;
        target: number | string;
        arguments: Record<string, { arg_0: string; arg_1: string }> | [string, string][];
        filtered_resps: ([number | string, unknown] | number | string)[];
      };
      const args = Array.isArray(s.arguments)
        ? s.arguments
        : Object.values(s.arguments).map((a) => [a.arg_0, a.arg_1] as [string, string]);
      return args.map(([context, continuation], i) => {
        const r = s.filtered_resps[i]!;
        return {
          doc: s.doc_id,
          target: Number(s.target),
          context,
          continuation,
          harness: Number(Array.isArray(r) ? r[0] : r),
        };
      });
    });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      model: { type: "string", default: "smollm2-135m-instruct" },
      "batch-size": { type: "string", default: "4" },
    },
  });
  const model = values.model!;
  const lmEval = await ensureHarness();
  const work = mkdtempSync(join(tmpdir(), "ortserve-lm-eval-"));
  const key = `lm-eval-${crypto.randomUUID()}`;
  process.env.ORTSERVE_API_KEY = key;
  const server = await startServer({
    ...SERVER_DEFAULTS,
    host: "127.0.0.1",
    port: 0,
    modelsDir: modelsDir(),
    dbPath: join(work, "ortserve.db"),
    workers: 1,
    threads: 2,
    maxNumSeqs: 8,
    maxModelLen: 2048,
    prefillChunk: 256,
    prefixCacheBytes: 64 << 20,
    maxBodyBytes: 8 << 20,
    announceKey: () => {},
  });
  try {
    writeTask(work);
    const modelDir = join(modelsDir(), model);
    const out = join(work, "out");
    const started = performance.now();
    await run(
      lmEval,
      [
        "--model",
        "local-completions",
        "--model_args",
        [
          `model=${model}`,
          `base_url=${server.url}/v1/completions`,
          "tokenizer_backend=huggingface",
          `tokenizer=${modelDir}`,
          "tokenized_requests=True",
          "num_concurrent=1",
          "max_retries=1",
        ].join(","),
        "--batch_size",
        values["batch-size"]!,
        "--tasks",
        TASK,
        "--include_path",
        work,
        "--output_path",
        out,
        "--log_samples",
      ],
      {
        ...process.env,
        OPENAI_API_KEY: key,
        HF_HUB_OFFLINE: "1",
        HF_DATASETS_OFFLINE: "1",
        TOKENIZERS_PARALLELISM: "false",
      },
    );
    const harnessSeconds = (performance.now() - started) / 1000;

    // The engine's own scoring of the same strings, split where the harness splits them.
    const tokenizer = await loadTransformersTokenizer(modelDir);
    const rows = harnessScores(out);
    let maxDiff = 0;
    const byDoc = new Map<number, { target: number; engine: number[]; harness: number[] }>();
    const encode: Encode = (text, special) => tokenizer.encode(text, { add_special_tokens: special });
    for (const r of rows) {
      const engine = await continuationLoglikelihood(
        server.engine,
        model,
        encode,
        { text: r.context, addSpecialTokens: false },
        r.continuation,
      );
      maxDiff = Math.max(maxDiff, Math.abs(engine - r.harness));
      const doc = byDoc.get(r.doc) ?? { target: r.target, engine: [], harness: [] };
      doc.engine.push(engine);
      doc.harness.push(r.harness);
      byDoc.set(r.doc, doc);
    }
    const argmax = (xs: number[]) => xs.indexOf(Math.max(...xs));
    const docs = [...byDoc.values()];
    const accuracy = (pick: (d: (typeof docs)[number]) => number[]) =>
      docs.filter((d) => argmax(pick(d)) === d.target).length / docs.length;
    const [results] = findFiles(out, /^results_.*\.json$/);
    const harnessAcc = results
      ? (JSON.parse(readFileSync(results, "utf8")) as { results: Record<string, Record<string, number>> })
          .results[TASK]?.["acc,none"]
      : undefined;
    console.log(
      JSON.stringify(
        {
          model,
          task: `${TASK} (${QUESTIONS.length} questions, ${rows.length} choices)`,
          harness: LM_EVAL,
          harness_accuracy: harnessAcc,
          engine_accuracy: accuracy((d) => d.engine),
          max_abs_loglikelihood_difference: maxDiff,
          harness_seconds: Math.round(harnessSeconds * 10) / 10,
        },
        null,
        2,
      ),
    );
  } finally {
    await server.close();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
