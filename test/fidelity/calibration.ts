/**
 * llama.cpp scored against itself with the same metrics, to read the format figures against: how
 * far two code paths or two settings of the reference engine already disagree.
 */
import { compareFormat, type FormatFigures } from "./compare.ts";
import { LlamaReference } from "./llama-reference.ts";
import type { FidelityPlan, ReferenceCase } from "./reference-cases.ts";

export interface SelfConsistency {
  /** One-token-at-a-time decode vs the batch evaluation the reference uses (no greedy part). */
  singleTokenDecode: FormatFigures;
  /** Default context settings (flash attention auto, F16 KV cache) vs the reference settings. */
  defaultSettings: FormatFigures;
}

export async function referenceSelfConsistency(
  ref: LlamaReference,
  gguf: string,
  cases: readonly ReferenceCase[],
  plan: FidelityPlan,
  threads: number,
  log: (line: string) => void,
): Promise<SelfConsistency> {
  const detokenize = (ids: readonly number[]) => ref.detokenize(ids);
  log("llama.cpp single-token decode vs batch");
  const singleTokenDecode = await compareFormat(
    cases,
    { vocabSize: ref.vocabSize, teacherForced: (tokens) => ref.logitRows(tokens, 1) },
    { greedyTokens: plan.greedyTokens, detokenize },
  );
  log("llama.cpp default context settings vs reference settings");
  const other = await LlamaReference.load(gguf, { threads, flashAttention: "auto", kvCacheType: "F16" });
  try {
    const defaultSettings = await compareFormat(
      cases,
      {
        vocabSize: other.vocabSize,
        teacherForced: (tokens) => other.logitRows(tokens),
        greedy: (prompt, n) => other.greedy(prompt, n),
      },
      { greedyTokens: plan.greedyTokens, detokenize },
    );
    return { singleTokenDecode, defaultSettings };
  } finally {
    await other.dispose();
  }
}
