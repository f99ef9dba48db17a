/**
 * The Responses API's `truncation: "auto"`: when the conversation does not fit the model's context
 * (with the output's room and the operator's token limits), its oldest items are dropped, as
 * OpenAI documents it. Measured exactly: each candidate is rendered through the model's template
 * and counted with its tokenizer, by the same rule the engine admits a prompt with. Items are
 * dropped a turn at a time — the conversation restarts at a user, system or developer message — so
 * no tool output is left without its call; `instructions` always stay. When even the last turn
 * does not fit, nothing is dropped and the engine refuses the prompt as it would without truncation.
 */

import { RequestError } from "../core/request-error.ts";
import { completionRoom } from "../core/step/admission.ts";
import type { EngineRequest } from "../core/types.ts";
import type { EngineModel } from "../engine/engine.ts";
import type { ChatCompletionRequest } from "../protocol/chat-request.ts";
import type { ChatMessage } from "../protocol/messages.ts";
import { chatMessages, type InputItem } from "../protocol/responses/items.ts";
import { chatPrompt } from "./chat-completions.ts";
import type { ServingDeps } from "./generation.ts";

/** The chat messages of the newest turns that fit; undefined when the whole conversation fits. */
export async function truncatedMessages(
  deps: ServingDeps,
  model: EngineModel,
  chat: ChatCompletionRequest,
  instructions: string | undefined,
  conversation: readonly InputItem[],
  limits: EngineRequest["limits"],
): Promise<ChatMessage[] | undefined> {
  const starts = conversation.flatMap((item, i) =>
    i === 0 || (item.type === "message" && item.role !== "assistant") ? [i] : [],
  );
  const messagesFrom = (start: number) => chatMessages(instructions, conversation.slice(start));
  const maxTokens = chat.max_completion_tokens ?? chat.max_tokens;
  const fits = async (start: number): Promise<boolean> => {
    const prompt = await chatPrompt(deps, { ...chat, messages: messagesFrom(start) }, model);
    const ids = await deps.engine.tokenize(model, prompt);
    try {
      completionRoom({ maxTokens, limits }, ids.length, model.config.maxModelLen);
      return true;
    } catch (err) {
      if (err instanceof RequestError) return false;
      throw err;
    }
  };
  if (await fits(0)) return undefined;
  // Fewer items never make a longer prompt: the first start that fits is found by bisection.
  let lo = 1;
  let hi = starts.length - 1;
  if (hi < lo || !(await fits(starts[hi]!))) return undefined;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (await fits(starts[mid]!)) hi = mid;
    else lo = mid + 1;
  }
  return messagesFrom(starts[hi]!);
}
