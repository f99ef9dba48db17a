/** Shared helpers for engine tests: request builders and event collection. */

import type { EngineCoreConfig, EngineEvent, EngineRequest, FinishReason } from "../../src/core/types.ts";
import type { EnginePool } from "../../src/workers/pool.ts";

export function engineConfig(modelDir: string, extra: Partial<EngineCoreConfig> = {}): EngineCoreConfig {
  return {
    modelDir,
    format: "fp32",
    schedulingPolicy: "fcfs",
    maxNumSeqs: 8,
    maxModelLen: 256,
    prefillChunk: 8,
    prefixCacheBytes: 16 << 20,
    intraOpThreads: 1,
    kvCacheDtype: "auto",
    jumpForward: true,
    grammarCompileTimeoutMs: 0,
    fairShare: true,
    ...extra,
  };
}

export function request(tokenIds: number[], extra: Partial<EngineRequest> = {}): EngineRequest {
  return {
    requestId: "test",
    prompt: { tokenIds },
    maxTokens: 12,
    n: 1,
    sampling: {
      temperature: 0,
      topP: 1,
      topK: 0,
      minP: 0,
      repetitionPenalty: 1,
      frequencyPenalty: 0,
      presencePenalty: 0,
      minTokens: 0,
      ignoreEos: true,
      stopTokenIds: [],
    },
    stop: [],
    includeStopStrInOutput: false,
    skipSpecialTokens: true,
    spacesBetweenSpecialTokens: true,
    returnTokensAsTokenIds: false,
    useBeamSearch: false,
    lengthPenalty: 1,
    priority: 0,
    ...extra,
  };
}

export function sampling(extra: Partial<EngineRequest["sampling"]>): EngineRequest["sampling"] {
  return { ...request([]).sampling, ...extra };
}

export interface ChoiceResult {
  tokens: number[];
  text: string;
  finishReason?: FinishReason;
  stopReason?: number | string | null;
  logprobs: number[];
}

export interface Result {
  choices: ChoiceResult[];
  events: EngineEvent[];
  error?: Extract<EngineEvent, { type: "error" }>;
  cachedTokens?: number;
  promptTokenIds?: number[];
}

export async function collect(
  pool: EnginePool,
  config: EngineCoreConfig,
  req: EngineRequest,
  onEvent?: (e: EngineEvent) => void,
  signal?: AbortSignal,
): Promise<Result> {
  const result: Result = { choices: [], events: [] };
  const choice = (i: number) => {
    result.choices[i] ??= { tokens: [], text: "", logprobs: [] };
    return result.choices[i]!;
  };
  for await (const e of pool.generate(config, req, signal)) {
    result.events.push(e);
    onEvent?.(e);
    if (e.type === "prompt") {
      result.cachedTokens = e.cachedTokens;
      result.promptTokenIds = e.promptTokenIds;
    } else if (e.type === "delta") {
      const c = choice(e.choice);
      c.tokens.push(...e.tokenIds);
      c.text += e.text;
      for (const lp of e.logprobs ?? []) c.logprobs.push(lp.logprob);
    } else if (e.type === "finish") {
      const c = choice(e.choice);
      c.finishReason = e.finishReason;
      c.stopReason = e.stopReason;
    } else if (e.type === "error") result.error = e;
  }
  return result;
}
