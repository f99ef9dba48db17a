/**
 * Attention A/B at the session level: one decode step of one row at 100 and at 1,500 cached
 * positions (median of `--steps`) and a 1,024-token prefill (two chunks of 512), for ONNX Runtime's
 * GroupQueryAttention, and ortserve's kernel over a float32, a float16 and an int8 cache, on the
 * default model's q4 weights. Each variant runs in its own process, one after
 * the other, `--runs` rounds: sessions in one process would each keep a spinning thread pool.
 *
 *   node bench/attention.ts [--runs 3] [--steps 40] [--threads 2]
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { readModelConfig } from "../src/core/model/model-config.ts";
import { weightPath } from "../src/core/model/model-files.ts";
import { BatchRunner } from "../src/core/runner/batch-runner.ts";
import { KvSlots } from "../src/core/runner/kv-slots.ts";
import { nativeSessions } from "../src/core/runner/native-session.ts";
import { modelsDir } from "../src/util/paths.ts";
import { median } from "./stats.ts";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    steps: { type: "string", default: "40" },
    threads: { type: "string", default: "2" },
    variant: { type: "string" },
  },
});

const VARIANTS = {
  "onnxruntime GQA, float32 cache": { cachedAttention: false, dtype: "float32" },
  "ortserve kernel, float32 cache": { cachedAttention: true, dtype: "float32" },
  "ortserve kernel, float16 cache": { cachedAttention: true, dtype: "float16" },
  "ortserve kernel, int8 cache": { cachedAttention: true, dtype: "int8" },
} as const;
type Variant = keyof typeof VARIANTS;

interface Figures {
  decode100: number;
  decode1500: number;
  prefill1024: number;
}

async function measure(variant: Variant): Promise<Figures> {
  if (!nativeSessions) throw new Error("the native session addon is not built (npm run build:native)");
  const dir = join(modelsDir(), "smollm2-135m-instruct");
  const c = readModelConfig(dir).decoder;
  const { cachedAttention, dtype } = VARIANTS[variant];
  const session = nativeSessions.create(weightPath(dir, "q4"), {
    intraOpThreads: Number(values.threads),
    interOpThreads: 1,
    cachedAttention,
    kvCacheDtype: dtype,
  });
  const shape = { layers: c.numLayers, kvHeads: c.numKvHeads, headDim: c.headDim };
  const runner = new BatchRunner(
    session,
    new KvSlots(shape, {
      maxRows: 2,
      maxPositions: 2048,
      initialPositions: 64,
      dtype,
    }),
  );
  const tokens = Array.from({ length: 2048 }, (_, i) => ((i * 37 + 11) % 4000) + 100);
  const step = async (context: number) => {
    for (let s = 0; s < context; s += 512)
      await runner.prefill(0, tokens.slice(s, Math.min(context, s + 512)), s);
    const times: number[] = [];
    for (let i = 0; i < Number(values.steps); i++) {
      const t0 = performance.now();
      await runner.decode([tokens[context]!], [context]);
      times.push(performance.now() - t0);
    }
    return median(times);
  };
  const decode100 = await step(100);
  const decode1500 = await step(1500);
  const t0 = performance.now();
  await runner.prefill(1, tokens.slice(0, 512), 0);
  await runner.prefill(1, tokens.slice(512, 1024), 512);
  const prefill1024 = performance.now() - t0;
  await session.release();
  return { decode100, decode1500, prefill1024 };
}

if (values.variant) {
  process.stdout.write(JSON.stringify(await measure(values.variant as Variant)));
} else {
  const results = new Map<Variant, Figures[]>();
  for (let r = 0; r < Number(values.runs); r++)
    for (const variant of Object.keys(VARIANTS) as Variant[]) {
      const out = execFileSync(
        process.execPath,
        [import.meta.filename, "--variant", variant, "--steps", values.steps!, "--threads", values.threads!],
        { encoding: "utf8" },
      );
      results.set(variant, [...(results.get(variant) ?? []), JSON.parse(out) as Figures]);
    }
  console.log(
    `median of ${values.runs} runs, ${values.threads} threads; decode step = median of ${values.steps}`,
  );
  console.log(
    "| attention | decode step at 100 (ms) | at 1,500 (ms) | tok/s at 1,500 / at 100 | prefill 1,024 (ms) |",
  );
  console.log("|---|---|---|---|---|");
  for (const [variant, runs] of results) {
    const d100 = median(runs.map((f) => f.decode100));
    const d1500 = median(runs.map((f) => f.decode1500));
    const prefill = median(runs.map((f) => f.prefill1024));
    console.log(
      `| ${variant} | ${d100.toFixed(2)} | ${d1500.toFixed(2)} | ${(d100 / d1500).toFixed(2)} | ${prefill.toFixed(0)} |`,
    );
  }
}
