/**
 * Where the CPU goes while a real `ortserve serve` process answers the targets' 16-stream HTTP load
 * (bench/http-load.ts, the official `openai` client in this process): CPU seconds per thread group
 * of the server (its main thread, the engine worker, ONNX Runtime's pool threads, the rest) and of
 * this client process, over the timed runs, next to the aggregate decode rate. On a 2-core machine
 * every CPU second the main thread or the client takes is one the engine's two threads wait for.
 *
 *   node bench/http-cpu.ts [--runs 3] [--threads 2]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { loadTransformersTokenizer } from "../src/core/runner/tokenizer.ts";
import { modelsDir } from "../src/util/paths.ts";
import { startServerProcess } from "../test/e2e/server-process.ts";
import { httpLoad } from "./http-load.ts";
import { benchPrompt } from "./prompt.ts";

const { values: args } = parseArgs({
  options: { runs: { type: "string", default: "3" }, threads: { type: "string", default: "2" } },
});
const MODEL = "smollm2-135m-instruct";
const MODEL_DIR = join(modelsDir(), MODEL);
const TICKS_PER_SECOND = 100;

/** CPU seconds per thread of a process, keyed by "tid name". */
function threadCpu(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      // The name is in parentheses and may hold spaces; the fields after it are plain.
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(`${tid} ${name}`, (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}

const text = await benchPrompt(MODEL_DIR, 1600);
const tokenizer = await loadTransformersTokenizer(MODEL_DIR);
const prompts = Array.from({ length: 16 }, (_, i) => tokenizer.decode(text.slice(i * 90, i * 90 + 64)));
const tmp = mkdtempSync(join(tmpdir(), "ortserve-http-cpu-"));
const apiKey = `bench-${process.pid}`;
const server = await startServerProcess({
  modelsDir: dirname(MODEL_DIR),
  dbPath: join(tmp, "ortserve.db"),
  apiKey,
  extraArgs: ["--threads", args.threads, "--max-num-seqs", "16", "--max-model-len", "2048"],
});
let salt = 0;
const load = (n: number, maxTokens: number) =>
  httpLoad({
    baseURL: `${server.url}/v1`,
    apiKey,
    model: MODEL,
    prompts: prompts.slice(0, n),
    maxTokens,
    extraBody: () => ({ cache_salt: `cpu-${++salt}` }),
  });
try {
  await load(2, 8);
  const pid = server.child.pid!;
  const before = threadCpu(pid);
  const clientBefore = process.cpuUsage();
  let seconds = 0;
  let tokens = 0;
  for (let i = 0; i < Number(args.runs); i++) {
    const r = await load(16, 128);
    seconds += r.seconds;
    tokens += r.results.reduce((s, x) => s + x.completionTokens, 0);
    process.stderr.write(`run ${i + 1}: ${r.tokensPerSecond.toFixed(1)} tok/s\n`);
  }
  const after = threadCpu(pid);
  const client = process.cpuUsage(clientBefore);
  const rows = [...after]
    .map(([thread, cpu]) => ({ thread, cpu: cpu - (before.get(thread) ?? 0) }))
    .filter((r) => r.cpu > 0.005)
    .sort((a, b) => b.cpu - a.cpu);
  console.log(`aggregate ${(tokens / seconds).toFixed(1)} tok/s over ${seconds.toFixed(1)} s of load`);
  console.log("CPU seconds (share of the load's wall time):");
  for (const r of rows)
    console.log(
      `  server ${r.thread.padEnd(28)} ${r.cpu.toFixed(2)} s (${((100 * r.cpu) / seconds).toFixed(1)}%)`,
    );
  const clientCpu = (client.user + client.system) / 1e6;
  console.log(
    `  client (this process)${" ".repeat(14)} ${clientCpu.toFixed(2)} s (${((100 * clientCpu) / seconds).toFixed(1)}%)`,
  );
} finally {
  await server.stop();
  rmSync(tmp, { recursive: true, force: true });
}
