/**
 * One item of an evaluation on one model or checkpoint, through the in-process Engine: greedy
 * generation scored by exact_match and contains, or multiple choice by log-likelihood.
 */
import type { Engine } from "../engine/engine.ts";
import type { EvalItem } from "./dataset.ts";
import { continuationLoglikelihood, type Encode } from "./loglikelihood.ts";

export interface ItemResult {
  item: number;
  exact_match?: number;
  contains?: number;
  mc_accuracy?: number;
  /** The generated text (answer items). */
  output?: string;
  /** Each choice's log-likelihood (choice items). */
  loglikelihoods?: number[];
}

export const METRICS = ["exact_match", "contains", "mc_accuracy"] as const;
export type MetricName = (typeof METRICS)[number];

export interface EvalSettings {
  /** Most tokens generated per answer item. */
  maxTokens: number;
}

export async function evaluateItem(
  engine: Engine,
  model: string,
  encode: Encode,
  item: EvalItem,
  settings: EvalSettings,
): Promise<ItemResult> {
  if (item.kind === "answer") {
    const out = await engine.generate({
      model,
      prompt: item.prompt,
      params: { maxTokens: settings.maxTokens, sampling: { temperature: 0 } },
    });
    const output = out.choices[0]!.text;
    const got = output.trim();
    const want = item.answer.trim();
    return {
      item: item.index,
      exact_match: got === want ? 1 : 0,
      contains: got.toLowerCase().includes(want.toLowerCase()) ? 1 : 0,
      output,
    };
  }
  // A text prompt is continued after a space (as lm-evaluation-harness does); a chat prompt
  // after its generation prompt.
  const context =
    "text" in item.prompt
      ? { text: item.prompt.text, addSpecialTokens: true }
      : ((await engine.prompt(engine.model(model), item.prompt)) as {
          text: string;
          addSpecialTokens: boolean;
        });
  const gap = "text" in item.prompt ? " " : "";
  const loglikelihoods: number[] = [];
  for (const choice of item.choices)
    loglikelihoods.push(await continuationLoglikelihood(engine, model, encode, context, gap + choice));
  const best = loglikelihoods.indexOf(Math.max(...loglikelihoods));
  return { item: item.index, mc_accuracy: best === item.answer ? 1 : 0, loglikelihoods };
}

/** Each metric's mean over the items that have it. */
export function aggregate(results: readonly ItemResult[]): Partial<Record<MetricName, number>> {
  const out: Partial<Record<MetricName, number>> = {};
  for (const m of METRICS) {
    const values = results.map((r) => r[m]).filter((v): v is number => v !== undefined);
    if (values.length) out[m] = values.reduce((a, b) => a + b, 0) / values.length;
  }
  return out;
}
