/**
 * One item of an evaluation on one model or checkpoint, through the in-process Engine: greedy
 * generation scored by exact_match and contains, or by json_valid against a schema (optionally
 * generated with the schema enforced), or multiple choice by log-likelihood.
 */
import type { StructuredConstraint } from "../core/structured/constraint-spec.ts";
import type { FinishReason } from "../core/types.ts";
import type { Engine, GeneratedChoice } from "../engine/engine.ts";
import { type EvalItem, schemaConstraint } from "./dataset.ts";
import { continuationLoglikelihood, type Encode } from "./loglikelihood.ts";

export interface ItemResult {
  item: number;
  exact_match?: number;
  contains?: number;
  mc_accuracy?: number;
  json_valid?: number;
  /** The generated text (answer and schema items). */
  output?: string;
  /** Why generation ended (schema items). */
  finish_reason?: FinishReason;
  /** Each choice's log-likelihood (choice items). */
  loglikelihoods?: number[];
}

export const METRICS = ["exact_match", "contains", "mc_accuracy", "json_valid"] as const;
export type MetricName = (typeof METRICS)[number];

export interface EvalSettings {
  /** Most tokens generated per answer item. */
  maxTokens: number;
}

async function greedy(
  engine: Engine,
  model: string,
  item: EvalItem,
  settings: EvalSettings,
  constraint?: StructuredConstraint,
): Promise<GeneratedChoice> {
  const out = await engine.generate({
    model,
    prompt: item.prompt,
    params: {
      maxTokens: settings.maxTokens,
      sampling: { temperature: 0 },
      ...(constraint ? { constraint } : {}),
    },
  });
  return out.choices[0]!;
}

export async function evaluateItem(
  engine: Engine,
  model: string,
  encode: Encode,
  item: EvalItem,
  settings: EvalSettings,
): Promise<ItemResult> {
  if (item.kind === "json") {
    const { text: output, finishReason } = await greedy(
      engine,
      model,
      item,
      settings,
      item.constrained ? schemaConstraint(item.schema) : undefined,
    );
    // A constrained output cut by max_tokens is an unfinished structure: invalid, whatever its prefix.
    const finished = !item.constrained || finishReason === "stop";
    return {
      item: item.index,
      json_valid: finished && item.validate(output) ? 1 : 0,
      output,
      finish_reason: finishReason,
    };
  }
  if (item.kind === "answer") {
    const output = (await greedy(engine, model, item, settings)).text;
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
