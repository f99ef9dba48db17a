/**
 * A reasoning effort asked for by a route that has one (Responses' `reasoning.effort`, Messages'
 * `output_config.effort`) reaches the chat template as `reasoning_effort` when the model's template
 * reads it; otherwise, and for efforts no template takes, it is a 400 naming the route's field: an
 * effort nothing reads would be silently ignored (an effort is no token budget; chat's
 * thinking_token_budget is).
 */
import type { EngineModel } from "../engine/engine.ts";
import { unsupportedField } from "../errors.ts";

/** The efforts a chat template's reasoning_effort takes (the chat request's range). */
export const TEMPLATE_EFFORTS = ["low", "medium", "high"] as const;
export type TemplateEffort = (typeof TEMPLATE_EFFORTS)[number];

export function templateEffort(effort: string, model: EngineModel, field: string): TemplateEffort {
  if (!TEMPLATE_EFFORTS.includes(effort as TemplateEffort))
    throw unsupportedField(
      field,
      `an effort of ${JSON.stringify(effort)} has no meaning here: a chat template's reasoning_effort takes ${TEMPLATE_EFFORTS.map((e) => JSON.stringify(e)).join(", ")}`,
    );
  const template = model.info.chatSource.chatTemplate;
  const text = typeof template === "string" ? template : Object.values(template ?? {}).join("\n");
  if (text.includes("reasoning_effort")) return effort as TemplateEffort;
  throw unsupportedField(
    field,
    `${model.name}'s chat template does not take a reasoning effort, so nothing would read ${JSON.stringify(effort)}`,
  );
}
