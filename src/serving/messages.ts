/**
 * The Anthropic Messages route: its request translated into the chat request (src/protocol/
 * anthropic/), then the chat route's prompt, engine request, accumulator and streamer, with
 * their output translated back. Nothing here generates on its own.
 */
import type { EngineRequest } from "../core/types.ts";
import type { EngineModel } from "../engine/engine.ts";
import { ApiError, unsupportedField } from "../errors.ts";
import {
  inMessagesTerms,
  type MessagesRequest,
  type PromptRequest,
  parseCountTokensRequest,
  parseMessagesRequest,
} from "../protocol/anthropic/messages-request.ts";
import { type AnthropicMessage, MessagesAccumulator } from "../protocol/anthropic/messages-response.ts";
import { type MessagesEvent, MessagesStreamer } from "../protocol/anthropic/messages-stream.ts";
import type { ChatCompletionRequest } from "../protocol/chat-request.ts";
import type { ResponseContext } from "../protocol/output-parts.ts";
import { ChatCompletionAccumulator } from "../protocol/response.ts";
import { ChatCompletionStreamer } from "../protocol/stream.ts";
import { chatEngineRequests, chatPrompt, chatReasoning, checkStrictToolChoice } from "./chat-completions.ts";
import type { GenerationResult, ServingContext } from "./context.ts";
import { type Accumulator, GenerationService, type Streamer } from "./generation.ts";
import { templateEffort } from "./template-effort.ts";

/** Thinking enabled needs a think block to hold to its budget: a model with a reasoning parser. */
function checkThinking(req: ChatCompletionRequest, model: EngineModel): void {
  if (req.chat_template_kwargs?.enable_thinking !== true || model.resolution.model.reasoningParser) return;
  throw unsupportedField(
    "thinking",
    `thinking of type "enabled": ${model.name} has no reasoning parser (reasoning_parser in its ortserve.json), so it has no think block to hold to budget_tokens; send {"type": "disabled"} or leave thinking out`,
  );
}

/** The model's checks of a Messages prompt, then output_config.effort set where the template reads it. */
function forModel(req: PromptRequest, model: EngineModel): void {
  checkThinking(req.chat, model);
  if (req.effort !== undefined)
    req.chat.reasoning_effort = templateEffort(req.effort, model, "output_config.effort");
}

export class MessagesService extends GenerationService<MessagesRequest, AnthropicMessage, MessagesEvent> {
  protected readonly label = "message";

  /** Generation as every route has it; errors of the chat route's checks and of the engine name the Messages fields. */
  override async create(
    body: unknown,
    raw: string,
    ctx: ServingContext,
  ): Promise<GenerationResult<AnthropicMessage, MessagesEvent>> {
    try {
      return await super.create(body, raw, ctx);
    } catch (err) {
      throw err instanceof ApiError ? inMessagesTerms(err) : err;
    }
  }

  protected parse(body: unknown): MessagesRequest {
    const req = parseMessagesRequest(body);
    checkStrictToolChoice(this.deps, req.chat);
    return req;
  }

  protected logFields(req: MessagesRequest): Record<string, unknown> {
    return { model: req.model, user: req.chat.user, stream: req.stream };
  }

  protected engineRequests(
    req: MessagesRequest,
    model: EngineModel,
    requestId: string,
  ): Promise<EngineRequest[]> {
    forModel(req, model);
    return chatEngineRequests(this.deps, req.chat, model, requestId);
  }

  protected override reasoning(model: EngineModel, requests: EngineRequest[]): ResponseContext["reasoning"] {
    return chatReasoning(model, requests[0]!);
  }

  protected accumulator(req: MessagesRequest, ctx: ResponseContext): Accumulator<AnthropicMessage> {
    return new MessagesAccumulator(new ChatCompletionAccumulator(req.chat, ctx));
  }

  protected streamer(req: MessagesRequest, ctx: ResponseContext): Streamer<MessagesEvent> {
    return new MessagesStreamer(new ChatCompletionStreamer(req.chat, ctx), ctx);
  }

  /** count_tokens: the prompt the same request would run, rendered and counted, nothing generated. */
  async countTokens(body: unknown): Promise<{ input_tokens: number }> {
    const req = parseCountTokensRequest(body);
    checkStrictToolChoice(this.deps, req.chat);
    const model = this.deps.engine.model(await this.deps.engine.resolve(req.chat.model));
    forModel(req, model);
    const prompt = await chatPrompt(this.deps, req.chat, model);
    const ids = await this.deps.engine.tokenize(model, prompt);
    return { input_tokens: ids.length };
  }
}
