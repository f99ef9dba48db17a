/**
 * `npm run fidelity`: compares the converted ONNX model (fp32 and q4) with the exact model (llama.cpp
 * on an F32 copy of the source GGUF) and with llama.cpp's run of the GGUF itself, prints one JSON
 * report on stdout and exits 1 when the criterion fails (suite.ts: fp32 is the exact function; q4
 * is at least as close to it as llama.cpp's own quantized run).
 *
 *   node test/fidelity/run.ts [--format fp32|q4] [--threads N] [--kv-cache-dtype auto|float32|float16|int8]
 *                             [--no-exact] [--calibrate] [--no-setup]
 *                             [--model <installed model> [--models-dir <dir>]] [--prompts N]
 *                             [--model-dir <converted model> --gguf <its source GGUF>]
 *
 * --kv-cache-dtype runs ortserve with that KV cache (as `serve --kv-cache-dtype`; default float32,
 * the reference's own, so the comparison is at one cache precision; `auto` is each format's serving
 * default); the report's `runtime` says which each format ran with.
 * --no-exact skips the exact model: the figures against llama.cpp's quantized run are printed and
 * nothing is judged (exit 0);
 * --calibrate adds llama.cpp scored against itself (single-token decode, default settings).
 *
 * --model compares an installed model (`ortserve pull`, `ortserve models`) with llama.cpp on the GGUF
 * it was converted from (found and verified by its SHA-256); --model-dir and --gguf name both by
 * path. The criterion is the same for every model. --prompts N scores only the first N prompts
 * (larger models on a small machine).
 *
 * `npm run fidelity` only sets up the default (q4) flavour, so a missing format is produced here
 * through `setup` unless --no-setup is given.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { parseKvCacheDtype } from "../../src/cli/args.ts";
import { runSetup } from "../../src/cli/commands/setup.ts";
import type { ModelFormat } from "../../src/core/model/model-files.ts";
import { sourceGguf } from "../../src/models/source-gguf.ts";
import { modelsDir } from "../../src/util/paths.ts";
import { hasConvertedModel } from "./ort-candidate.ts";
import { fidelityPrompts } from "./prompts.ts";
import { defaultModelDir, FORMATS, runFidelity } from "./suite.ts";

const { values } = parseArgs({
  options: {
    format: { type: "string", multiple: true },
    threads: { type: "string" },
    "kv-cache-dtype": { type: "string" },
    "no-exact": { type: "boolean" },
    calibrate: { type: "boolean" },
    "no-setup": { type: "boolean" },
    model: { type: "string" },
    "models-dir": { type: "string" },
    "model-dir": { type: "string" },
    gguf: { type: "string" },
    prompts: { type: "string" },
  },
});
if ((values["model-dir"] === undefined) !== (values.gguf === undefined))
  throw new Error("--model-dir and --gguf go together");
if (values.model !== undefined && values["model-dir"] !== undefined)
  throw new Error("--model names an installed model; --model-dir and --gguf name one by path: give one");
const installed =
  values.model === undefined ? undefined : join(modelsDir(values["models-dir"]), values.model);
if (installed !== undefined && !existsSync(installed))
  throw new Error(`no model "${values.model}" in ${dirname(installed)} (\`ortserve models\` lists them)`);
const modelDir = installed ?? values["model-dir"];
const gguf = installed !== undefined ? await sourceGguf(installed) : values.gguf;

const formats = (values.format ?? FORMATS) as ModelFormat[];
for (const f of formats) if (!FORMATS.includes(f)) throw new Error(`unknown format: ${f}`);
const log = (line: string) => process.stderr.write(`${line}\n`);

if (!(values["no-setup"] || modelDir)) {
  for (const format of formats) {
    if (!hasConvertedModel(defaultModelDir(), format)) await runSetup({ format, log });
  }
}

const report = await runFidelity({
  continuationTokens: 48,
  greedyTokens: 32,
  formats,
  prompts: values.prompts ? fidelityPrompts.slice(0, Number(values.prompts)) : undefined,
  modelDir,
  gguf,
  threads: values.threads ? Number(values.threads) : undefined,
  kvCacheDtype: parseKvCacheDtype(values["kv-cache-dtype"], "float32"),
  exact: !values["no-exact"],
  selfCheck: values.calibrate,
  log,
});
process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
const incomplete = formats.filter((f) => !report.formats[f]);
for (const line of report.failures) log(`FAIL ${line}`);
for (const f of incomplete) log(`MISSING ${report.missing[f] ?? f}`);
if (!report.criterion.judged)
  log("not judged: --no-exact skips the exact model the criterion is measured against");
const judgedFailed = report.criterion.judged && !report.pass;
process.exitCode = judgedFailed || incomplete.length > 0 ? 1 : 0;
