/**
 * A request's omitted fields → their values: sampling from the request, then the model's
 * generation_config, then vLLM's defaults; everything else from vLLM's request defaults. Every
 * entry point (the HTTP protocol layer, the in-process API) completes requests here.
 */
import type { GenerationDefaults } from "./model/model-config.ts";
import { RequestError } from "./request-error.ts";
import { isGreedy, type RequestSampling, resolveSampling } from "./sample/params.ts";
import type { EngineRequest } from "./types.ts";

/** Everything of a request but its id and prompt, each field optional. */
export type GenerateParams = Partial<Omit<EngineRequest, "requestId" | "prompt" | "sampling">> & {
  sampling?: Partial<RequestSampling>;
};

export function completeRequest(
  requestId: string,
  prompt: EngineRequest["prompt"],
  params: GenerateParams = {},
  defaults: GenerationDefaults = {},
): EngineRequest {
  const sampling = resolveSampling(params.sampling ?? {}, defaults);
  const n = params.n ?? 1;
  const useBeamSearch = params.useBeamSearch ?? false;
  // Beam search has its own parameters in vLLM, so the greedy n check does not apply to it.
  if (isGreedy(sampling.temperature) && n > 1 && !useBeamSearch)
    throw new RequestError("invalid_request", `n must be 1 when using greedy sampling, got ${n}.`, "n");
  const request: EngineRequest = {
    requestId,
    prompt,
    n,
    sampling,
    stop: params.stop ?? [],
    includeStopStrInOutput: params.includeStopStrInOutput ?? false,
    skipSpecialTokens: params.skipSpecialTokens ?? true,
    spacesBetweenSpecialTokens: params.spacesBetweenSpecialTokens ?? true,
    returnTokensAsTokenIds: params.returnTokensAsTokenIds ?? false,
    useBeamSearch,
    lengthPenalty: params.lengthPenalty ?? 1,
    priority: params.priority ?? 0,
  };
  const optional = [
    "maxTokens",
    "maxTokensField",
    "truncatePromptTokens",
    "logprobs",
    "promptLogprobs",
    "promptLogits",
    "echoPrompt",
    "repetitionDetection",
    "cacheSalt",
    "constraint",
    "reasoning",
  ] as const;
  for (const key of optional) if (params[key] !== undefined) Object.assign(request, { [key]: params[key] });
  return request;
}
