/**
 * What llama.cpp says about each fidelity prompt, computed once and shared by every ONNX format:
 * the prompt's tokens, its greedy continuation, and the next-token distribution at every position
 * of prompt + continuation (teacher forcing, so both engines see exactly the same inputs).
 */
import type { LlamaReference, ReferenceDist } from "./llama-reference.ts";
import type { FidelityPrompt } from "./prompts.ts";

export interface FidelityPlan {
  /** Greedy tokens appended to each prompt before teacher forcing. */
  continuationTokens: number;
  /** Length of the free-running greedy comparison. */
  greedyTokens: number;
}

export interface ReferenceCase {
  id: string;
  promptTokens: number[];
  /** Prompt + continuation: the teacher-forced input. */
  tokens: number[];
  /** One per entry of `tokens`: the distribution of the token after it. */
  dists: ReferenceDist[];
  /** llama.cpp's greedy continuation, `greedyTokens` long unless EOS came first. */
  greedy: number[];
  /**
   * First position whose prefix no earlier case already had. The chat prompts share their system
   * turn, and scoring those identical positions once per prompt would weigh them many times over.
   */
  firstScored: number;
}

export async function buildReferenceCases(
  ref: LlamaReference,
  prompts: readonly FidelityPrompt[],
  plan: FidelityPlan,
): Promise<ReferenceCase[]> {
  const cases: ReferenceCase[] = [];
  for (const p of prompts) {
    const promptTokens = ref.tokenize(p.text);
    // Greedy decoding is deterministic, so one run serves both the continuation and the greedy check.
    const generated = await ref.greedy(promptTokens, Math.max(plan.continuationTokens, plan.greedyTokens));
    const tokens = [...promptTokens, ...generated.slice(0, plan.continuationTokens)];
    const dists = await ref.teacherForced(tokens);
    const firstScored = Math.max(0, ...cases.map((c) => commonPrefix(c.tokens, tokens)));
    cases.push({
      id: p.id,
      promptTokens,
      tokens,
      dists,
      greedy: generated.slice(0, plan.greedyTokens),
      firstScored,
    });
  }
  return cases;
}

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
