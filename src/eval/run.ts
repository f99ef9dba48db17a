/**
 * An evaluation over a model's checkpoints: each checkpoint's items run through the in-process
 * Engine several at a time (the engine batches them), results are stored as they finish
 * (resumable), and each checkpoint's aggregates are written into its checkpoint.json so the
 * checkpoint listing shows them.
 */
import { loadTransformersTokenizer } from "../core/runner/tokenizer.ts";
import type { Engine } from "../engine/engine.ts";
import { mergeCheckpointMetrics } from "../models/checkpoint-metrics.ts";
import type { ServedModel } from "../models/registry.ts";
import type { EvalItem } from "./dataset.ts";
import { aggregate, type EvalSettings, evaluateItem, type ItemResult, type MetricName } from "./evaluate.ts";
import type { ResultStore } from "./results.ts";

export interface EvalTarget {
  /** The name requests use: "<id>:step<N>", or the model id for its base weights. */
  name: string;
  /** Checkpoint UUID, or the model id. */
  key: string;
  step: number | null;
  dir: string;
  checkpoint: boolean;
}

export interface TargetSummary {
  target: EvalTarget;
  metrics: Partial<Record<MetricName, number>>;
  items: number;
}

/**
 * `all` (every checkpoint; the base weights when there are none), `latest`, or steps
 * ("100,200"). Throws naming a step the model lacks.
 */
export function evalTargets(model: ServedModel, which: string): EvalTarget[] {
  const of = (c: ServedModel["checkpoints"][number]): EvalTarget => ({
    name: `${model.id}:step${c.step}`,
    key: c.id,
    step: c.step,
    dir: c.dir,
    checkpoint: true,
  });
  const base: EvalTarget = { name: model.id, key: model.id, step: null, dir: model.dir, checkpoint: false };
  if (which === "all") return model.checkpoints.length ? model.checkpoints.map(of) : [base];
  if (which === "latest") return model.checkpoints.length ? [of(model.checkpoints.at(-1)!)] : [base];
  return which.split(",").map((s) => {
    const step = Number(s.trim());
    const c = model.checkpoints.find((x) => x.step === step);
    if (!/^\d+$/.test(s.trim()) || !c)
      throw new Error(`model "${model.id}" has no checkpoint for step "${s}"`);
    return of(c);
  });
}

export interface RunOptions {
  engine: Engine;
  targets: EvalTarget[];
  items: EvalItem[];
  settings: EvalSettings;
  store: ResultStore;
  /** Items in flight at once per checkpoint. */
  concurrency: number;
  /** Prefix of the metric names written into checkpoint.json ("<dataset>/exact_match"). */
  metricPrefix: string;
  onProgress?: (done: number, total: number, label: string) => void;
}

export async function runEvaluation(opts: RunOptions): Promise<TargetSummary[]> {
  const { engine, items, store } = opts;
  const total = opts.targets.length * items.length;
  let done = 0;
  const summaries: TargetSummary[] = [];
  for (const target of opts.targets) {
    const tok = await loadTransformersTokenizer(target.dir);
    const encode = (text: string, special: boolean) => tok.encode(text, { add_special_tokens: special });
    const results: ItemResult[] = [];
    const queue = [...items];
    const worker = async () => {
      for (let item = queue.shift(); item; item = queue.shift()) {
        let r: ItemResult | undefined = store.get(target.key, item.index);
        if (!r) {
          r = await evaluateItem(engine, target.name, encode, item, opts.settings);
          store.add(target.key, r);
        }
        results.push(r);
        opts.onProgress?.(++done, total, target.name);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, opts.concurrency) }, worker));
    const metrics = aggregate(results);
    if (target.checkpoint)
      mergeCheckpointMetrics(
        target.dir,
        Object.fromEntries(Object.entries(metrics).map(([k, v]) => [`${opts.metricPrefix}/${k}`, v])),
      );
    // One checkpoint at a time: its engine is freed before the next one loads.
    await engine.release(target.dir);
    summaries.push({ target, metrics, items: results.length });
  }
  return summaries;
}
