/**
 * /tokenize and /detokenize: the model's tokenizer, the prompt rendered as generation renders it.
 * Debt: these and count_tokens pass no admission control (no per-key limits); their work is bounded
 * by the body size limit, the template pool's budgets and a tokenizer thread of their own.
 */
import type { EngineRequest } from "../core/types.ts";
import { parseDetokenizeRequest, parseTokenizeRequest, type TokenizeResponse } from "../protocol/tokenize.ts";
import { chatPrompt } from "./chat-completions.ts";
import type { ServingDeps } from "./generation.ts";

export class TokenizeService {
  private readonly deps: ServingDeps;

  constructor(deps: ServingDeps) {
    this.deps = deps;
  }

  async tokenize(body: unknown): Promise<TokenizeResponse> {
    const req = parseTokenizeRequest(body);
    const engine = this.deps.engine;
    const model = engine.model(await engine.resolve(req.model));
    const prompt: EngineRequest["prompt"] =
      req.kind === "chat"
        ? await chatPrompt(this.deps, req.chat, model)
        : { text: req.prompt, addSpecialTokens: req.addSpecialTokens };
    const tokens = await engine.tokenize(model, prompt);
    return { count: tokens.length, max_model_len: model.config.maxModelLen, tokens, token_strs: null };
  }

  async detokenize(body: unknown): Promise<{ prompt: string }> {
    const req = parseDetokenizeRequest(body);
    const engine = this.deps.engine;
    const model = engine.model(await engine.resolve(req.model));
    return { prompt: await engine.detokenize(model, req.tokens) };
  }
}
