/**
 * The legacy completions logprobs shape (vLLM's `_create_completion_logprobs`): parallel lists of
 * token strings, their logprobs, a top-alternatives map per token and each token's character
 * offset in the choice's text. Echoed prompt tokens come first; the first prompt token has no
 * logprob (null) and no alternatives.
 */
import type { PromptTokenLogprob, TokenLogprob } from "../core/types.ts";
import { codePointLength } from "../util/code-points.ts";

export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: (number | null)[];
  top_logprobs: (Record<string, number> | null)[];
  text_offset: number[];
}

/** One token of the legacy list: its string, logprob and alternatives (the token itself first). */
export interface LegacyToken {
  token: string;
  logprob: number | null;
  top: Record<string, number> | null;
}

/** vLLM never returns -inf (JSON cannot carry it): logprobs are floored here. */
const floor = (lp: number) => Math.max(lp, -9999.0);

/**
 * Prompt tokens as legacy entries. `count` alternatives are kept besides the token itself (vLLM
 * keeps the first count + 1 entries of each position's map).
 */
export function promptTokens(
  tokens: readonly string[],
  logprobs: readonly (PromptTokenLogprob | null)[],
  count: number,
): LegacyToken[] {
  return tokens.map((token, i) => {
    const p = logprobs[i];
    if (!p) return { token, logprob: null, top: null };
    const top: Record<string, number> = {};
    for (const e of p.entries.slice(0, count + 1)) top[e.token] ??= floor(e.logprob);
    return { token, logprob: floor(p.entries[0]!.logprob), top };
  });
}

/** Generated tokens as legacy entries: the sampled token, then its top alternatives. */
export function generatedTokens(logprobs: readonly TokenLogprob[]): LegacyToken[] {
  return logprobs.map((l) => {
    const top: Record<string, number> = { [l.token]: floor(l.logprob) };
    for (const t of l.top) top[t.token] ??= floor(t.logprob);
    return { token: l.token, logprob: floor(l.logprob), top };
  });
}

/**
 * The legacy lists for `tokens`, the first at character `offset` of the choice's text; returns
 * them and the offset after the last token (where a following chunk's tokens start).
 */
export function legacyLogprobs(
  tokens: readonly LegacyToken[],
  offset: number,
): { logprobs: CompletionLogprobs; end: number } {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = offset;
  for (const t of tokens) {
    out.tokens.push(t.token);
    out.token_logprobs.push(t.logprob);
    out.top_logprobs.push(t.top);
    out.text_offset.push(at);
    at += codePointLength(t.token);
  }
  return { logprobs: out, end: at };
}
