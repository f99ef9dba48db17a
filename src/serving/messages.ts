/**
 * The Anthropic Messages route: its request translated into the chat request (src/protocol/
 * anthropic/), then the chat route's prompt, engine request, accumulator and streamer, with
 * their output translated back. Nothing here generates on its own.
 */
import type { EngineRequest } from "../core/types.ts";
import type { EngineModel } from "../engine/engine.ts";
import { unsupportedField } from "../errors.ts";
import {
  type MessagesRequest,
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
import { type Accumulator, GenerationService, type Streamer } from "./generation.ts";

/** Thinking enabled needs a think block to hold to its budget: a model with a reasoning parser. */
function checkThinking(req: ChatCompletionRequest, model: EngineModel): void {
  if (req.chat_template_kwargs?.enable_thinking !== true || model.resolution.model.reasoningParser) return;
  throw unsupportedField(
    "thinking",
    `thinking of type "enabled": ${model.name} has no reasoning parser (reasoning_parser in its ortserve.json), so it has no think block to hold to budget_tokens; send {"type": "disabled"} or leave thinking out`,
  );
}

export class MessagesService extends GenerationService<MessagesRequest, AnthropicMessage, MessagesEvent> {
  protected readonly label = "message";

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
    checkThinking(req.chat, model);
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
    checkStrictToolChoice(this.deps, req);
    const model = this.deps.engine.model(this.deps.engine.resolve(req.model));
    checkThinking(req, model);
    const prompt = await chatPrompt(this.deps, req, model);
    const ids = await this.deps.engine.tokenize(model, prompt);
    return { input_tokens: ids.length };
  }
}
