/** What a request that echoes its prompt returns of it (legacy completions' `echo`). */
import { tokenLogprobText } from "../output/token-text.ts";
import type { TokenizerLike } from "../output/tokenizer-like.ts";
import type { EngineRequest, PromptEcho } from "../types.ts";

/**
 * The prompt's text — the request's own when the model saw all of it (vLLM echoes the prompt
 * string), else its tokens decoded as HF's Python `decode` does — and each token's string.
 */
export function promptEcho(tokenizer: TokenizerLike, req: EngineRequest, promptIds: number[]): PromptEcho {
  const whole = "text" in req.prompt && req.truncatePromptTokens === undefined;
  const text = whole
    ? (req.prompt as { text: string }).text
    : tokenizer.decode(promptIds, {
        skipSpecialTokens: false,
        cleanUpTokenizationSpaces: tokenizer.cleanUpTokenizationSpaces,
      });
  const tokens = promptIds.map((id) => tokenLogprobText(tokenizer, id, req.returnTokensAsTokenIds));
  return { text, tokens };
}
