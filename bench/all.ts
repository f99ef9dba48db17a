/**
 * `npm run bench`: the performance targets (bench/targets.ts), then the structured-output
 * benches — decode with and without a JSON schema at 1 and 16 streams (bench/structured-decode.ts)
 * and compile / mask times over a JSONSchemaBench-style folder (bench/structured.ts), run when
 * `--schemas <folder>` names one or the workplace's sample sits at ../shared/data/jsonschemabench.
 * Each part runs in a process of its own, one after the other (they would compete for the cores).
 *
 * `--model` (with `--models-dir`, `--gguf`, `--ik-llama-server`) picks the targets' model; the
 * structured-output benches keep the default model (their figures are about the grammar, not size).
 *
 *   npm run bench -- [--runs 3] [--threads 2] [--schemas <folder>] [--skip-llama-server]
 *                    [--model <name>] [--models-dir <dir>] [--gguf <file>] [--ik-llama-server <binary>]
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    threads: { type: "string", default: "2" },
    schemas: { type: "string" },
    "skip-llama-server": { type: "boolean", default: false },
    model: { type: "string" },
    "models-dir": { type: "string" },
    gguf: { type: "string" },
    "ik-llama-server": { type: "string" },
  },
});
/** The targets' own options, passed on as given. */
const targetOptions = (["model", "models-dir", "gguf", "ik-llama-server"] as const).flatMap((k) =>
  values[k] === undefined ? [] : [`--${k}`, values[k]],
);
const here = dirname(new URL(import.meta.url).pathname);
const sample = join(here, "..", "..", "shared", "data", "jsonschemabench");
const schemas = values.schemas ?? (existsSync(sample) ? sample : undefined);

function part(script: string, args: string[]): boolean {
  process.stdout.write(`\n== node bench/${script} ${args.join(" ")}\n`);
  const r = spawnSync(process.execPath, [join(here, script), ...args], { stdio: "inherit" });
  return r.status === 0;
}

const common = ["--runs", values.runs, "--threads", values.threads];
const results = [
  part("targets.ts", [
    ...common,
    ...targetOptions,
    ...(values["skip-llama-server"] ? ["--skip-llama-server"] : []),
  ]),
  part("structured-decode.ts", [...common, "--max-tokens", "256"]),
];
if (schemas) results.push(part("structured.ts", [schemas, "--outputs", "12", "--max-tokens", "200"]));
else process.stdout.write("\n(bench/structured.ts skipped: no schema folder; pass --schemas <folder>)\n");
process.exitCode = results.every(Boolean) ? 0 : 1;
