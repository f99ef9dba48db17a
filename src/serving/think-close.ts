/**
 * The text a thinking budget forces when it is spent: `</think>` and what the model's chat template
 * writes after it before the answer (Qwen3's writes "\n\n"). Read once per model by rendering a
 * finished assistant turn with reasoning; a template that does not show past reasoning (R1's drops
 * it) gives `</think>` alone, as vLLM forces it.
 */
import type { EngineModel } from "../engine/engine.ts";
import type { ModelInfo } from "../engine/model-info.ts";
import { THINK_CLOSE } from "../protocol/reasoning/think-parser.ts";
import type { ServingDeps } from "./generation.ts";

const THOUGHT = "ortserve-thought-8f3a";
const ANSWER = "ortserve-answer-8f3a";

/** By the model's facts as read: a model pulled again at the same path has new ones. */
const cache = new WeakMap<ModelInfo, Promise<string>>();

export function thinkCloseText(deps: ServingDeps, model: EngineModel): Promise<string> {
  const key = model.info;
  let text = cache.get(key);
  if (!text) {
    text = render(deps, model);
    cache.set(key, text);
    // A failed render is tried again by the next request.
    text.catch(() => cache.delete(key));
  }
  return text;
}

async function render(deps: ServingDeps, model: EngineModel): Promise<string> {
  const prompt = await deps.engine.prompt(model, {
    messages: [
      { role: "user", content: "?" },
      { role: "assistant", content: ANSWER, reasoning: THOUGHT },
    ],
    addGenerationPrompt: false,
  });
  if (!("text" in prompt)) return THINK_CLOSE;
  return closeAfter(prompt.text);
}

/** `</think>` and the whitespace a rendered turn puts between it and the answer. */
export function closeAfter(rendered: string): string {
  const thought = rendered.indexOf(THOUGHT);
  const close = thought < 0 ? -1 : rendered.indexOf(THINK_CLOSE, thought);
  const answer = close < 0 ? -1 : rendered.indexOf(ANSWER, close);
  if (answer < 0) return THINK_CLOSE;
  const between = rendered.slice(close + THINK_CLOSE.length, answer);
  return /^\s*$/.test(between) ? THINK_CLOSE + between : THINK_CLOSE;
}
