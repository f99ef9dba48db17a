/**
 * One side of an A/B between two source trees: the engine of the tree at `--root` (a checkout or
 * `git worktree` of another commit) on this checkout's converted model, measured the way
 * bench/targets.ts measures its ortserve rows, printed as one JSON line. Alternate the two trees
 * in one sitting, since this machine's figures drift by 10% or more from one minute to the next:
 *
 *   git worktree add /tmp/before <commit> && (cd /tmp/before && npm run build:native)
 *   for i in 1 2 3; do node bench/tree-ab.ts --root /tmp/before; node bench/tree-ab.ts; done
 *
 *   node bench/tree-ab.ts [--root <dir>] [--runs 3] [--only single,at100,at1500,streams16,prefill1024]
 *                         [--model <name>] [--models-dir <dir>]
 *
 * prefill1024 is the time to the first token of a 1,024-token prompt, in ms; the rest are tok/s.
 */
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { Engine as EngineType } from "../src/engine/engine.ts";
import { modelsDir, repoRoot } from "../src/util/paths.ts";
import { benchPrompt } from "./prompt.ts";
import { median, nowSeconds } from "./stats.ts";
import { timed } from "./timed-request.ts";

const { values } = parseArgs({
  options: {
    root: { type: "string", default: repoRoot },
    runs: { type: "string", default: "3" },
    only: { type: "string", default: "single,at100,at1500,streams16" },
    model: { type: "string", default: "smollm2-135m-instruct" },
    "models-dir": { type: "string", default: modelsDir() },
  },
});
const root = resolve(values.root);
const runs = Number(values.runs);
const only = new Set(values.only.split(","));
const MODEL = values.model;
const MODELS_DIR = resolve(values["models-dir"]);

// The tree under test supplies the engine; prompts and timing come from this checkout's bench.
const { Engine } = (await import(
  join(root, "src/engine/engine.ts")
)) as typeof import("../src/engine/engine.ts");

let salt = 0;
const greedy = (tokenIds: number[], maxTokens: number) => ({
  model: MODEL,
  prompt: { tokenIds },
  params: { maxTokens, cacheSalt: `ab-${++salt}`, sampling: { temperature: 0, ignoreEos: true } },
});

// Typed as this checkout's engine: what the probe calls (open, generate, close) is the same in both.
const engine = (await Engine.open({
  modelsDir: MODELS_DIR,
  workers: 1,
  threads: 2,
  maxNumSeqs: 16,
})) as unknown as EngineType;
const text = await benchPrompt(join(MODELS_DIR, MODEL), 1600);
const streams = Array.from({ length: 16 }, (_, i) => text.slice(i * 90, i * 90 + 64));
const repeat = async (f: () => Promise<number>) => {
  const xs: number[] = [];
  for (let i = 0; i < runs; i++) xs.push(+(await f()).toFixed(1));
  return xs;
};
const out: Record<string, unknown> = { root };
await timed(engine, greedy(text.slice(0, 128), 16));
if (only.has("single"))
  out.single = await repeat(async () => (await timed(engine, greedy(text.slice(0, 128), 256))).decodeRate);
if (only.has("at100"))
  out.at100 = await repeat(async () => (await timed(engine, greedy(text.slice(0, 100), 128))).decodeRate);
if (only.has("at1500"))
  out.at1500 = await repeat(async () => (await timed(engine, greedy(text.slice(0, 1500), 128))).decodeRate);
if (only.has("prefill1024"))
  out.prefill1024 = await repeat(
    async () => (await timed(engine, greedy(text.slice(0, 1024), 1))).ttft * 1000,
  );
if (only.has("streams16"))
  out.streams16 = await repeat(async () => {
    const t0 = nowSeconds();
    const done = await Promise.all(streams.map((p) => timed(engine, greedy(p, 128))));
    return done.reduce((s, r) => s + r.tokens, 0) / (nowSeconds() - t0);
  });
for (const [k, v] of Object.entries(out)) if (Array.isArray(v)) out[`${k}Median`] = +median(v).toFixed(1);
console.log(JSON.stringify(out));
await engine.close();
