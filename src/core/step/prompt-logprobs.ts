/** Prompt logprobs (vLLM's prompt_logprobs): each next prompt token's logprob, rank and the top alternatives. */
import { tokenLogprobText } from "../output/token-text.ts";
import type { TokenizerLike } from "../output/tokenizer-like.ts";
import { logSumExp, rankOf, toLogprob, topLogprobs } from "../sample/ops/logprobs.ts";
import type { ActiveRequest } from "./active-request.ts";

/** Adds the entries of a prefill chunk's logits rows (`n` positions from `start`) to the request. */
export function collectPromptLogprobs(
  a: ActiveRequest,
  logits: Float32Array,
  vocab: number,
  start: number,
  n: number,
  tokenizer: TokenizerLike,
): void {
  const k = a.req.promptLogprobs ?? 0;
  const ids = new Int32Array(k);
  const vals = new Float64Array(k);
  const asIds = a.req.returnTokensAsTokenIds;
  for (let i = 0; i < n; i++) {
    const target = start + i + 1;
    if (target >= a.promptIds.length) break;
    const row = logits.subarray(i * vocab, (i + 1) * vocab);
    const lse = logSumExp(row);
    const id = a.promptIds[target]!;
    const entries = [{ tokenId: id, logprob: toLogprob(row[id]!, lse), rank: rankOf(row, id), token: "" }];
    topLogprobs(row, lse, ids, vals).forEach((t, j) => {
      if (t.tokenId !== id) entries.push({ ...t, rank: j + 1, token: "" });
    });
    for (const e of entries) e.token = tokenLogprobText(tokenizer, e.tokenId, asIds);
    a.promptLogprobs.push({ entries });
  }
}
