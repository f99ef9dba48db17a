/**
 * Per-request setup, done once when a request is submitted: validation against the model and the
 * engine's limits, tokenization and truncation of the prompt, and every choice's sampler, output
 * text and stop rules (or the beam group). Whatever fails here throws a RequestError for this
 * request alone; nothing of it is left to a step, where a failure would hit the whole batch.
 */

import type { DecoderConfig } from "../model/model-config.ts";
import { SequenceText } from "../output/sequence-text.ts";
import type { TokenizerLike } from "../output/tokenizer-like.ts";
import type { TokenizerThread } from "../prompt/tokenizer-thread.ts";
import { RequestError } from "../request-error.ts";
import { randomSeed, seedForChoice } from "../sample/ops/rng.ts";
import { SequenceSampler } from "../sample/sampler.ts";
import { outOfVocab } from "../token-ids.ts";
import type { EngineCoreConfig, EngineRequest } from "../types.ts";
import type { ActiveRequest, EventSink } from "./active-request.ts";
import { BeamGroup } from "./beam-group.ts";
import { checkAgainstConfig } from "./config-checks.ts";
import type { TokenConstraint } from "./constrain.ts";
import { promptEcho } from "./prompt-echo.ts";
import { Sequence } from "./sequence.ts";
import { ThinkBlock, type ThinkBudget } from "./think-block.ts";
import { ThinkBudgetConstraint } from "./think-budget-constraint.ts";

/** Text ↔ ids, as the worker's tokenizer provides them. */
export interface PromptTokenizer {
  /** On the engine's thread: only for short texts (jump-forward's forced strings). */
  encode(text: string, addSpecialTokens: boolean): number[];
  tokenizer: TokenizerLike;
  /** Prompts and word lists, tokenized in a thread of their own (absent: `encode` here). */
  prompts?: Pick<TokenizerThread, "info" | "prompt" | "words" | "close">;
}

export interface AdmissionContext {
  config: EngineCoreConfig;
  model: DecoderConfig;
  tokenize: PromptTokenizer;
}

/** What a request's setup computed off the forward-pass thread, before `admit`. */
export interface PreparedPrompt {
  promptIds: number[];
  maxTokens: number;
  /** bad_words as token id sequences. */
  bannedWords: number[][];
  /** The thinking budget with its close text tokenized. */
  thinkBudget?: ThinkBudget;
}

/**
 * The request checked against the engine's configuration, its prompt tokenized (in the tokenizer's
 * thread, refused by size first where the bytes alone exceed the context, and stopped as soon as
 * the prompt cannot fit) and truncated, its bad words tokenized.
 */
export async function prepare(req: EngineRequest, ctx: AdmissionContext): Promise<PreparedPrompt> {
  checkAgainstConfig(req, ctx.config);
  const keep = truncationKeep(req, ctx.config.maxModelLen);
  let ids = await promptIds(req, ctx, keep);
  if (keep !== undefined && ids.length > keep) ids = ids.slice(ids.length - keep);
  // By length first: a prompt that cannot fit is refused without a pass over its ids.
  const { promptIds: kept, maxTokens } = fitPrompt(req, ids, ctx.config.maxModelLen);
  const vocab = ctx.model.vocabSize;
  const bad = outOfVocab(kept, vocab);
  if (bad.length)
    throw new RequestError("invalid_request", `prompt token id ${bad[0]} is outside [0, ${vocab})`);
  const bannedWords = await badWordsTokenIds(req.sampling.badWords ?? [], ctx.tokenize);
  return { promptIds: kept, maxTokens, bannedWords, thinkBudget: thinkBudget(req, ctx) };
}

/** The request's thinking budget with its close text as token ids (beam search takes none). */
function thinkBudget(req: EngineRequest, ctx: AdmissionContext): ThinkBudget | undefined {
  const budget = req.reasoning?.budget;
  if (!budget) return undefined;
  if (req.useBeamSearch)
    throw new RequestError(
      "invalid_request",
      "a thinking budget cannot be held with beam search",
      "thinking_token_budget",
    );
  const closeIds = ctx.tokenize.encode(budget.closeText, false);
  if (closeIds.length === 0)
    throw new RequestError(
      "invalid_request",
      "the think block's close text has no tokens",
      "thinking_token_budget",
    );
  return { tokens: budget.tokens, closeIds };
}

export function admit(
  req: EngineRequest,
  emit: EventSink,
  arrival: number,
  ctx: AdmissionContext,
  prepared: PreparedPrompt,
  /** One per choice (structured outputs), already compiled. */
  constraints?: TokenConstraint[],
): ActiveRequest {
  const { promptIds, maxTokens } = prepared;
  const active: ActiveRequest = {
    req,
    emit,
    priority: req.priority,
    arrival,
    shareKey: req.shareKey,
    queuedAt: performance.now(),
    promptIds,
    maxTokens,
    computed: 0,
    cachedTokens: 0,
    sequences: [],
    promptLogprobs: [null],
    promptLogits: [],
    aborted: false,
    state: "waiting",
  };
  if (req.echoPrompt) active.echo = promptEcho(ctx.tokenize.tokenizer, req, promptIds);
  if (maxTokens === 0) return active;
  if (req.useBeamSearch) active.beams = beamGroup(active, ctx, constraints);
  else active.sequences = choices(active, ctx, prepared, constraints);
  return active;
}

/** The prompt tokens truncation keeps (undefined: no truncation). */
function truncationKeep(req: EngineRequest, L: number): number | undefined {
  if (req.truncatePromptTokens === undefined) return undefined;
  const room = L - (req.maxTokens ?? 1);
  const keep = req.truncatePromptTokens === -1 ? room : req.truncatePromptTokens;
  if (keep > room)
    throw new RequestError(
      "invalid_request",
      `truncate_prompt_tokens=${req.truncatePromptTokens} leaves no room for the completion in a context of ${L} tokens`,
      "truncate_prompt_tokens",
    );
  if (keep < 1)
    throw new RequestError(
      "invalid_request",
      `truncate_prompt_tokens=${req.truncatePromptTokens} leaves no prompt: keep at least 1 token, or -1 for as many as fit`,
      "truncate_prompt_tokens",
    );
  return keep;
}

/**
 * Longest text prompt tokenized on the engine's thread: at worst (one token per character) about
 * 20 ms of a step's time, usually 1 ms.
 */
export const INLINE_PROMPT_CHARS = 1024;

/** The prompt's token ids; a text prompt is tokenized off this thread, and only as far as it can fit. */
async function promptIds(
  req: EngineRequest,
  ctx: AdmissionContext,
  keep: number | undefined,
): Promise<number[]> {
  if ("tokenIds" in req.prompt) return req.prompt.tokenIds;
  const { text, addSpecialTokens } = req.prompt;
  const prompts = ctx.tokenize.prompts;
  // A short prompt costs less here than the round trip to the tokenizer's thread.
  if (!prompts || text.length <= INLINE_PROMPT_CHARS) return ctx.tokenize.encode(text, addSpecialTokens);
  // The most prompt tokens that can be served: the context, or the operator's limit below it.
  const L = ctx.config.maxModelLen;
  const operator = req.limits?.maxPromptTokens;
  const limit = Math.min(L, operator ?? L);
  const tooLong = (atLeast: number) =>
    limit < L
      ? promptLimitExceeded(`more than ${limit} (at least ${atLeast})`, limit)
      : contextExceeded(L, atLeast);
  if (keep === undefined) {
    const { maxBytesPerToken } = await prompts.info();
    // No token stands for more than maxBytesPerToken bytes: the size alone can decide. A string has
    // at least as many UTF-8 bytes as UTF-16 units, so a megabyte prompt is refused without
    // counting its bytes on this thread.
    const atLeast = (bytes: number) => (maxBytesPerToken ? Math.ceil(bytes / maxBytesPerToken) : 0);
    if (atLeast(text.length) > limit) throw tooLong(atLeast(text.length));
    const exact = atLeast(Buffer.byteLength(text, "utf8"));
    if (exact > limit) throw tooLong(exact);
  }
  const out = await prompts.prompt(text, addSpecialTokens, limit, keep);
  if ("exceeded" in out) throw tooLong(out.atLeast);
  return out.ids;
}

function promptLimitExceeded(tokens: string, maxPromptTokens: number): RequestError {
  return new RequestError(
    "invalid_request",
    `Your messages resulted in ${tokens} prompt tokens; this server's limit is ${maxPromptTokens} prompt tokens per request (max_prompt_tokens).`,
    "messages",
  );
}

export function contextExceeded(L: number, atLeast: number): RequestError {
  return new RequestError(
    "invalid_request",
    `This model's maximum context length is ${L} tokens. However, your messages resulted in more than ${L} tokens (at least ${atLeast}). Please reduce the length of the messages.`,
    "messages",
  );
}

/** The prompt against the context and the operator's limits; the completion's room. */
function fitPrompt(req: EngineRequest, ids: number[], L: number): { promptIds: number[]; maxTokens: number } {
  if (ids.length === 0) throw new RequestError("invalid_request", "the prompt is empty", "messages");
  return { promptIds: ids, maxTokens: completionRoom(req, ids.length, L) };
}

/**
 * The tokens a prompt of `promptTokens` leaves the completion under the context `L` and the
 * operator's limits; a RequestError when it does not fit (the Responses API's truncation asks too).
 */
export function completionRoom(
  req: Pick<EngineRequest, "maxTokens" | "maxTokensField" | "limits">,
  promptTokens: number,
  L: number,
): number {
  checkTokenLimits(req, promptTokens);
  if (req.maxTokens === undefined) {
    if (promptTokens >= L)
      throw new RequestError(
        "invalid_request",
        `This model's maximum context length is ${L} tokens. However, your messages resulted in ${promptTokens} tokens, leaving no room for a completion. Please reduce the length of the messages.`,
        "messages",
      );
    return Math.min(L, req.limits?.maxTotalTokens ?? L) - promptTokens;
  }
  if (promptTokens + req.maxTokens > L)
    throw new RequestError(
      "invalid_request",
      `This model's maximum context length is ${L} tokens. However, you requested ${promptTokens + req.maxTokens} tokens (${promptTokens} in the messages, ${req.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      req.maxTokensField ?? "max_tokens",
    );
  return req.maxTokens;
}

/** The operator's limits, checked before the context: each refusal names the limit it hit. */
function checkTokenLimits(
  req: Pick<EngineRequest, "maxTokens" | "maxTokensField" | "limits">,
  promptTokens: number,
): void {
  const { maxPromptTokens, maxTotalTokens } = req.limits ?? {};
  if (maxPromptTokens !== undefined && promptTokens > maxPromptTokens)
    throw promptLimitExceeded(String(promptTokens), maxPromptTokens);
  if (maxTotalTokens === undefined) return;
  if (
    req.maxTokens === undefined
      ? promptTokens >= maxTotalTokens
      : promptTokens + req.maxTokens > maxTotalTokens
  )
    throw new RequestError(
      "invalid_request",
      `This request needs ${promptTokens + (req.maxTokens ?? 1)} tokens (${promptTokens} in the messages, ${req.maxTokens ?? 1} at least in the completion); this server's limit is ${maxTotalTokens} prompt plus completion tokens per request (max_total_tokens).`,
      req.maxTokens === undefined ? "messages" : (req.maxTokensField ?? "max_tokens"),
    );
}

/** vLLM bans each bad word with and without a leading space. */
async function badWordsTokenIds(words: readonly string[], tokenize: PromptTokenizer): Promise<number[][]> {
  if (words.length === 0) return [];
  const texts = words.flatMap((w) => [w, ` ${w}`]);
  const lists = tokenize.prompts
    ? await tokenize.prompts.words(texts)
    : texts.map((t) => tokenize.encode(t, false));
  return words.flatMap((_, i) => {
    const plain = lists[2 * i]!;
    const spaced = lists[2 * i + 1]!;
    return plain.join() === spaced.join() ? [plain] : [plain, spaced];
  });
}

/** The request's choices: a sampler (choice i seeded with seed + i), output text and stop rules each. */
function choices(
  a: ActiveRequest,
  ctx: AdmissionContext,
  prepared: PreparedPrompt,
  constraints?: TokenConstraint[],
): Sequence[] {
  const r = a.req;
  const banned = prepared.bannedWords;
  const { model, tokenize } = ctx;
  const { badWords: _badWords, seed, ...sampling } = r.sampling;
  const baseSeed = seed ?? randomSeed();
  const eos = new Set(model.eosTokenIds);
  // Jump-forward needs a constraint; forced tokens are not sampled, so they have no logprobs to give.
  const encode =
    ctx.config.jumpForward && r.constraint && constraints && r.logprobs === undefined
      ? (text: string) => tokenize.encode(text, false)
      : undefined;
  return Array.from({ length: r.n }, (_, i) => {
    const think = r.reasoning && new ThinkBlock(r.reasoning.opened, prepared.thinkBudget);
    const own = constraints?.[i];
    // A budget forces its close through the constraint stage's mask.
    const constraint =
      think && prepared.thinkBudget ? new ThinkBudgetConstraint(think, model.vocabSize, own) : own;
    const sampler = new SequenceSampler(
      {
        ...sampling,
        badWordsTokenIds: banned.length ? banned : undefined,
        eosTokenIds: model.eosTokenIds,
        seed: seedForChoice(baseSeed, i),
        logprobs: r.logprobs,
      },
      model.vocabSize,
      a.promptIds,
    );
    const text = new SequenceText(tokenize.tokenizer, {
      skipSpecialTokens: r.skipSpecialTokens,
      spacesBetweenSpecialTokens: r.spacesBetweenSpecialTokens,
      stop: r.stop,
      includeStopStrInOutput: r.includeStopStrInOutput,
      minTokens: sampling.minTokens,
      promptIds: a.promptIds,
    });
    return new Sequence(
      i,
      sampler,
      text,
      tokenize.tokenizer,
      {
        maxTokens: a.maxTokens,
        minTokens: sampling.minTokens,
        eosTokenIds: eos,
        stopTokenIds: new Set(sampling.stopTokenIds),
        ignoreEos: sampling.ignoreEos,
        repetition: r.repetitionDetection,
        returnTokensAsTokenIds: r.returnTokensAsTokenIds,
        wantLogprobs: r.logprobs !== undefined,
      },
      a.promptIds.length,
      constraint,
      encode,
      think,
    );
  });
}

function beamGroup(a: ActiveRequest, ctx: AdmissionContext, constraints?: TokenConstraint[]): BeamGroup {
  const r = a.req;
  return new BeamGroup(
    a.promptIds.length,
    {
      beamWidth: r.n,
      maxTokens: a.maxTokens,
      eosTokenId: ctx.model.eosTokenIds[0] ?? -1,
      lengthPenalty: r.lengthPenalty,
      ignoreEos: r.sampling.ignoreEos,
      includeStopStrInOutput: r.includeStopStrInOutput,
    },
    ctx.tokenize.tokenizer,
    r.skipSpecialTokens,
    constraints && { perRow: constraints, stopTokenIds: ctx.model.eosTokenIds },
  );
}
