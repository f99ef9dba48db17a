/**
 * Chat completions: the protocol parts of a generation (src/serving/generation.ts has the rest) —
 * the chat request, its prompt through the model's chat template, and vLLM-shaped responses.
 */
import type { EngineRequest } from "../core/types.ts";
import type { EngineModel } from "../engine/engine.ts";
import { type ChatCompletionRequest, parseChatCompletionRequest } from "../protocol/chat-request.ts";
import type { ResponseContext } from "../protocol/output-parts.ts";
import { ChatCompletionAccumulator, type ChatCompletionResponse } from "../protocol/response.ts";
import { type ChatCompletionChunk, ChatCompletionStreamer } from "../protocol/stream.ts";
import { toEngineRequest } from "../protocol/to-engine.ts";
import { type Accumulator, GenerationService, type Streamer } from "./generation.ts";

export class ChatCompletionsService extends GenerationService<
  ChatCompletionRequest,
  ChatCompletionResponse,
  ChatCompletionChunk
> {
  protected readonly label = "chat completion";

  protected parse(body: unknown, raw: string): ChatCompletionRequest {
    return parseChatCompletionRequest(body, raw);
  }

  protected logFields(req: ChatCompletionRequest): Record<string, unknown> {
    return { model: req.model, user: req.user, stream: req.stream, n: req.n };
  }

  protected engineRequests(
    req: ChatCompletionRequest,
    model: EngineModel,
    requestId: string,
  ): EngineRequest[] {
    const prompt = this.deps.engine.prompt(model, {
      messages: req.messages,
      chatTemplate: req.chat_template,
      chatTemplateKwargs: req.chat_template_kwargs,
      addGenerationPrompt: req.add_generation_prompt,
      continueFinalMessage: req.continue_final_message,
      tools: req.tools,
      documents: req.documents,
      reasoningEffort: req.reasoning_effort,
      addSpecialTokens: req.add_special_tokens,
    });
    return [
      toEngineRequest(req, {
        requestId,
        prompt,
        vocabSize: model.info.vocabSize,
        generationDefaults: model.info.generationDefaults,
      }),
    ];
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
