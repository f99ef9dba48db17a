/**
 * Completions (legacy, POST /v1/completions): the protocol parts of a generation
 * (src/serving/generation.ts has the rest) — one engine request per prompt, text or token ids as
 * given (no chat template), and vLLM-shaped text_completion responses.
 */
import { checkTokenIds } from "../core/token-ids.ts";
import type { EngineRequest } from "../core/types.ts";
import type { EngineModel } from "../engine/engine.ts";
import { asApiErrors } from "../errors.ts";
import { type CompletionRequest, parseCompletionRequest } from "../protocol/completion-request.ts";
import { CompletionAccumulator, type CompletionResponse } from "../protocol/completion-response.ts";
import { type CompletionChunk, CompletionStreamer } from "../protocol/completion-stream.ts";
import type { ResponseContext } from "../protocol/output-parts.ts";
import { routeEngineRequest } from "../protocol/to-engine.ts";
import { type Accumulator, GenerationService, type Streamer } from "./generation.ts";

export class CompletionsService extends GenerationService<
  CompletionRequest,
  CompletionResponse,
  CompletionChunk
> {
  protected readonly label = "completion";

  protected parse(body: unknown, raw: string): CompletionRequest {
    return parseCompletionRequest(body, raw);
  }

  protected logFields(req: CompletionRequest): Record<string, unknown> {
    return { model: req.model, user: req.user, stream: req.stream, n: req.n, prompts: req.prompts.length };
  }

  protected async engineRequests(
    req: CompletionRequest,
    model: EngineModel,
    requestId: string,
  ): Promise<EngineRequest[]> {
    const vocab = model.info.vocabSize;
    // vLLM: with echo, the prompt's logprobs come with as many alternatives as `logprobs`.
    const shared = {
      ...req,
      prompt_logprobs: req.prompt_logprobs ?? (req.echo ? req.logprobs : undefined),
    };
    const output = {
      maxTokens: req.max_tokens,
      maxTokensField: "max_tokens" as const,
      logprobs: req.logprobs === undefined ? undefined : { count: req.logprobs, param: "logprobs" },
      echoPrompt: req.echo,
    };
    return req.prompts.map((p, i) => {
      const param = req.prompts.length > 1 ? `prompt[${i}]` : "prompt";
      if ("tokenIds" in p) asApiErrors(() => checkTokenIds(param, p.tokenIds, vocab));
      return routeEngineRequest(shared, output, {
        // vLLM: prompt i of a batch runs as "<id>-<i>".
        requestId: req.prompts.length > 1 ? `${requestId}-${i}` : requestId,
        prompt: "text" in p ? { text: p.text, addSpecialTokens: req.add_special_tokens } : p,
        vocabSize: vocab,
        generationDefaults: model.info.generationDefaults,
        compactJson: model.resolution.model.structuredOutputs?.disableAnyWhitespace,
      });
    });
  }

  protected accumulator(req: CompletionRequest, ctx: ResponseContext): Accumulator<CompletionResponse> {
    return new CompletionAccumulator(req, ctx);
  }

  protected streamer(req: CompletionRequest, ctx: ResponseContext): Streamer<CompletionChunk> {
    return new CompletionStreamer(req, ctx);
  }
}
