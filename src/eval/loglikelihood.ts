/**
 * The log-likelihood of a continuation after a context, as evaluation harnesses define it: the
 * tokens of context + continuation past the context's own tokens, each scored by the engine.
 */
import type { Engine } from "../engine/engine.ts";

/** Text → token ids as the model's tokenizer gives them (what the engine's worker uses too). */
export type Encode = (text: string, addSpecialTokens: boolean) => number[];

export async function continuationLoglikelihood(
  engine: Engine,
  model: string,
  encode: Encode,
  context: { text: string; addSpecialTokens: boolean },
  continuation: string,
): Promise<number> {
  const contextTokens = encode(context.text, context.addSpecialTokens).length;
  const scored = await engine.score({
    model,
    prompt: { text: context.text + continuation, addSpecialTokens: context.addSpecialTokens },
  });
  let total = 0;
  for (let i = Math.max(contextTokens, 1); i < scored.promptTokenIds.length; i++)
    total += scored.promptLogprobs[i]!.entries[0]!.logprob;
  return total;
}
