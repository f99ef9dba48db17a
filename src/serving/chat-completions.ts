/**
 * Chat completions: the protocol parts of a generation (src/serving/generation.ts has the rest) —
 * the chat request, its prompt through the model's chat template, and vLLM-shaped responses.
 */
import { namesModelTemplate } from "../chat/index.ts";
import type { EngineRequest } from "../core/types.ts";
import type { EngineModel } from "../engine/engine.ts";
import { invalidRequest, unsupportedField } from "../errors.ts";
import { type ChatCompletionRequest, parseChatCompletionRequest } from "../protocol/chat-request.ts";
import type { ResponseContext } from "../protocol/output-parts.ts";
import { startsInReasoning } from "../protocol/reasoning/think-parser.ts";
import { ChatCompletionAccumulator, type ChatCompletionResponse } from "../protocol/response.ts";
import { type ChatCompletionChunk, ChatCompletionStreamer } from "../protocol/stream.ts";
import { toEngineRequest } from "../protocol/to-engine.ts";
import { type Accumulator, GenerationService, type ServingDeps, type Streamer } from "./generation.ts";
import { thinkCloseText } from "./think-close.ts";

/** --strict-tool-choice: only "none", as the service spec has it. */
export function checkStrictToolChoice(deps: ServingDeps, req: ChatCompletionRequest): void {
  if (deps.strictToolChoice && req.tool_choice !== "none")
    throw unsupportedField(
      "tool_choice",
      'this server follows the service spec and takes only "none" (started with --strict-tool-choice)',
    );
}

/** Tool calls are read by the model's own parser; a model without one takes only "none". */
function checkToolParser(req: ChatCompletionRequest, model: EngineModel): void {
  if (req.tool_choice === "none" || model.resolution.model.toolParser !== undefined) return;
  throw unsupportedField(
    "tool_choice",
    `${model.name} has no tool parser (tool_parser in its ortserve.json); only "none" is served`,
  );
}

/**
 * A template in the request is code the server would run: refused unless the operator trusts
 * request templates (vLLM's --trust-request-chat-template). Naming one of the model's own
 * templates is not. chat_template_kwargs stay allowed: they are variables of the operator's
 * template, which alone decides what they select, and every render runs under the template
 * pool's time and output budgets.
 */
function checkTemplateTrust(deps: ServingDeps, req: ChatCompletionRequest, model: EngineModel): void {
  const requested = req.chat_template;
  if (!requested || deps.trustRequestChatTemplate) return;
  if (namesModelTemplate(model.info.chatSource.chatTemplate, requested)) return;
  throw invalidRequest(
    "chat_template: this server does not render templates sent in requests (the operator can allow them with `ortserve serve --trust-request-chat-template`).",
    "chat_template",
    "untrusted_chat_template",
  );
}

/** A chat request's prompt through the model's template (every route that speaks chat renders here). */
export async function chatPrompt(
  deps: ServingDeps,
  req: ChatCompletionRequest,
  model: EngineModel,
): Promise<EngineRequest["prompt"]> {
  checkTemplateTrust(deps, req, model);
  checkToolParser(req, model);
  return deps.engine.prompt(model, {
    messages: req.messages,
    chatTemplate: req.chat_template,
    chatTemplateKwargs: req.chat_template_kwargs,
    addGenerationPrompt: req.add_generation_prompt,
    continueFinalMessage: req.continue_final_message,
    tools: req.tools,
    documents: req.documents,
    reasoningEffort: req.reasoning_effort,
    addSpecialTokens: req.add_special_tokens,
    truncates: req.truncate_prompt_tokens !== undefined,
  });
}

/**
 * A reasoning model's chat output: whether it starts inside the think block (read from the rendered
 * prompt); undefined for a model without a reasoning parser.
 */
export function chatReasoning(model: EngineModel, request: EngineRequest): { opened: boolean } | undefined {
  const parser = model.resolution.model.reasoningParser;
  if (!parser || !("text" in request.prompt)) return undefined;
  return { opened: startsInReasoning(parser, request.prompt.text) };
}

/** A chat request's one engine request (the chat route's and every route translated into chat). */
export async function chatEngineRequests(
  deps: ServingDeps,
  req: ChatCompletionRequest,
  model: EngineModel,
  requestId: string,
): Promise<EngineRequest[]> {
  const prompt = await chatPrompt(deps, req, model);
  const request = toEngineRequest(req, {
    requestId,
    prompt,
    vocabSize: model.info.vocabSize,
    generationDefaults: model.info.generationDefaults,
    compactJson: model.resolution.model.structuredOutputs?.disableAnyWhitespace,
  });
  // A reasoning model thinks first: structured outputs and required tool calls bind its answer.
  const reasoning = chatReasoning(model, request);
  if (reasoning && request.constraint)
    request.constraint = { ...request.constraint, afterThinking: reasoning };
  if (reasoning) request.reasoning = { ...reasoning };
  // The request's budget, else the model's (a reasoning model's default, as its operator set it).
  const budget = req.thinking_token_budget ?? (reasoning && model.resolution.model.thinkingTokenBudget);
  if (budget !== undefined) {
    if (!reasoning)
      throw unsupportedField(
        "thinking_token_budget",
        `${model.name} has no reasoning parser (reasoning_parser in its ortserve.json), so it has no think block to hold to a budget`,
      );
    request.reasoning = {
      ...reasoning,
      budget: { tokens: budget, closeText: await thinkCloseText(deps, model) },
    };
  }
  return [request];
}

export class ChatCompletionsService extends GenerationService<
  ChatCompletionRequest,
  ChatCompletionResponse,
  ChatCompletionChunk
> {
  protected readonly label = "chat completion";

  protected parse(body: unknown, raw: string): ChatCompletionRequest {
    const req = parseChatCompletionRequest(body, raw);
    checkStrictToolChoice(this.deps, req);
    return req;
  }

  protected logFields(req: ChatCompletionRequest): Record<string, unknown> {
    return { model: req.model, user: req.user, stream: req.stream, n: req.n };
  }

  protected engineRequests(
    req: ChatCompletionRequest,
    model: EngineModel,
    requestId: string,
  ): Promise<EngineRequest[]> {
    return chatEngineRequests(this.deps, req, model, requestId);
  }

  protected override reasoning(model: EngineModel, requests: EngineRequest[]): ResponseContext["reasoning"] {
    return chatReasoning(model, requests[0]!);
  }

  protected accumulator(
    req: ChatCompletionRequest,
    ctx: ResponseContext,
  ): Accumulator<ChatCompletionResponse> {
    return new ChatCompletionAccumulator(req, ctx);
  }

  protected streamer(req: ChatCompletionRequest, ctx: ResponseContext): Streamer<ChatCompletionChunk> {
    return new ChatCompletionStreamer(req, ctx);
  }
}
