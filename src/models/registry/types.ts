/** Shapes the model registry hands to the HTTP layer and the engine. */
import type { ModelFormat } from "../fetch/model-meta.ts";

export type SchedulingPolicy = "fcfs" | "priority";

/** How tool calls are read from the model's output (src/protocol/tool-calls/). */
export const TOOL_PARSERS = ["hermes"] as const;
export type ToolParserName = (typeof TOOL_PARSERS)[number];

/** How reasoning is told apart from the answer in chat output (src/protocol/reasoning/). */
export const REASONING_PARSERS = ["deepseek_r1", "qwen3"] as const;
export type ReasoningParserName = (typeof REASONING_PARSERS)[number];

/**
 * A model's structured-output defaults (vLLM's --structured-outputs-config, per model). A request's
 * own option wins (chat's structured_outputs.disable_any_whitespace).
 */
export interface StructuredOutputDefaults {
  /** true: JSON constraints allow no whitespace outside strings unless a request asks for it. */
  disableAnyWhitespace: boolean;
}

/** A further converted variant of a model, under `<model>/checkpoints/<dir>/`. */
export interface Checkpoint {
  /** UUID from checkpoint.json; stable across restarts. */
  id: string;
  /** Training step, integer >= 0, unique within its model. */
  step: number;
  metrics: Record<string, number>;
  /** The checkpoint's own model directory (config.json, tokenizer files, onnx/). */
  dir: string;
  /** Unix seconds. */
  created: number;
  /** Weights present in dir/onnx (the model's format preferred); undefined for a metadata-only checkpoint. */
  format: ModelFormat | undefined;
  /** Why weights that are present cannot be served (the start-time file check); format is then undefined. */
  problem?: string;
}

export interface ServedModel {
  id: string;
  dir: string;
  /** Which converted weights of the base model to load. */
  format: ModelFormat;
  schedulingPolicy: SchedulingPolicy;
  /** ortserve.json's tool_parser; without one, tool_choice other than "none" is refused. */
  toolParser?: ToolParserName;
  /** ortserve.json's reasoning_parser: chat output is split into reasoning and answer. */
  reasoningParser?: ReasoningParserName;
  /** ortserve.json's thinking_token_budget: the budget of a request that names none (needs a reasoning parser). */
  thinkingTokenBudget?: number;
  /** ortserve.json's structured_outputs: the model's defaults for the JSON constraints of every API. */
  structuredOutputs?: StructuredOutputDefaults;
  maxModelLen?: number;
  /** Unix seconds. */
  created: number;
  /** Sorted by step, ascending. */
  checkpoints: Checkpoint[];
}

/** A directory under the models dir that cannot be served, and why. */
export interface UnavailableModel {
  id: string;
  dir: string;
  reason: string;
}

/** What a requested model name refers to. */
export interface Resolution {
  model: ServedModel;
  checkpoint?: Checkpoint;
  /** The directory whose onnx/ to load. */
  dir: string;
  /** Weights file flavour to load from dir; undefined when a checkpoint has metadata but no weights. */
  format: ModelFormat | undefined;
  /** The response's `model` field: the name as requested ("id" or "id:step25"). */
  servedName: string;
  /**
   * Which directory `dir` was when scanned (registry.ts revisionOf): a model pulled again replaces
   * its directory at the same path, and what was loaded from the old one must not serve the new
   * one's requests.
   */
  revision: string;
}
