/**
 * Per-request setup, done once when a request is submitted: validation against the model and the
 * engine's limits, tokenization and truncation of the prompt, and every choice's sampler, output
 * text and stop rules (or the beam group). Whatever fails here throws a RequestError for this
 * request alone; nothing of it is left to a step, where a failure would hit the whole batch.
 */

import type { DecoderConfig } from "../model/model-config.ts";
import { SequenceText } from "../output/sequence-text.ts";
import type { TokenizerLike } from "../output/tokenizer-like.ts";
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

/** Text ↔ ids, as the worker's tokenizer provides them. */
export interface PromptTokenizer {
  encode(text: string, addSpecialTokens: boolean): number[];
  tokenizer: TokenizerLike;
}

export interface AdmissionContext {
  config: EngineCoreConfig;
  model: DecoderConfig;
  tokenize: PromptTokenizer;
}

export function admit(
  req: EngineRequest,
  emit: EventSink,
  arrival: number,
  ctx: AdmissionContext,
  /** One per choice (structured outputs), already compiled. */
  constraints?: TokenConstraint[],
): ActiveRequest {
  checkAgainstConfig(req, ctx.config);
  const { promptIds, maxTokens } = preparePrompt(req, ctx);
  const active: ActiveRequest = {
    req,
    emit,
    priority: req.priority,
    arrival,
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
  else active.sequences = choices(active, ctx, constraints);
  return active;
}

function preparePrompt(
  req: EngineRequest,
  ctx: AdmissionContext,
): { promptIds: number[]; maxTokens: number } {
  const L = ctx.config.maxModelLen;
  let ids =
    "tokenIds" in req.prompt
      ? req.prompt.tokenIds
      : ctx.tokenize.encode(req.prompt.text, req.prompt.addSpecialTokens);
  const vocab = ctx.model.vocabSize;
  const bad = outOfVocab(ids, vocab);
  if (bad.length)
    throw new RequestError("invalid_request", `prompt token id ${bad[0]} is outside [0, ${vocab})`);
  if (req.truncatePromptTokens !== undefined) {
    const keep = req.truncatePromptTokens === -1 ? L - (req.maxTokens ?? 1) : req.truncatePromptTokens;
    if (keep > L - (req.maxTokens ?? 1))
      throw new RequestError(
        "invalid_request",
        `truncate_prompt_tokens=${req.truncatePromptTokens} leaves no room for the completion in a context of ${L} tokens`,
        "truncate_prompt_tokens",
      );
    if (ids.length > keep) ids = ids.slice(ids.length - keep);
  }
  if (ids.length === 0) throw new RequestError("invalid_request", "the prompt is empty", "messages");
  checkTokenLimits(req, ids.length);
  if (req.maxTokens === undefined) {
    if (ids.length >= L)
      throw new RequestError(
        "invalid_request",
        `This model's maximum context length is ${L} tokens. However, your messages resulted in ${ids.length} tokens, leaving no room for a completion. Please reduce the length of the messages.`,
        "messages",
      );
    const room = Math.min(L, req.limits?.maxTotalTokens ?? L) - ids.length;
    return { promptIds: ids, maxTokens: room };
  }
  if (ids.length + req.maxTokens > L)
    throw new RequestError(
      "invalid_request",
      `This model's maximum context length is ${L} tokens. However, you requested ${ids.length + req.maxTokens} tokens (${ids.length} in the messages, ${req.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      req.maxTokensField ?? "max_tokens",
    );
  return { promptIds: ids, maxTokens: req.maxTokens };
}

/** The operator's limits, checked before the context: each refusal names the limit it hit. */
function checkTokenLimits(req: EngineRequest, promptTokens: number): void {
  const { maxPromptTokens, maxTotalTokens } = req.limits ?? {};
  if (maxPromptTokens !== undefined && promptTokens > maxPromptTokens)
    throw new RequestError(
      "invalid_request",
      `Your messages resulted in ${promptTokens} prompt tokens; this server's limit is ${maxPromptTokens} prompt tokens per request (max_prompt_tokens).`,
      "messages",
    );
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
function badWordsTokenIds(words: readonly string[], tokenize: PromptTokenizer): number[][] {
  return words.flatMap((w) => {
    const plain = tokenize.encode(w, false);
    const spaced = tokenize.encode(` ${w}`, false);
    return plain.join() === spaced.join() ? [plain] : [plain, spaced];
  });
}

/** The request's choices: a sampler (choice i seeded with seed + i), output text and stop rules each. */
function choices(a: ActiveRequest, ctx: AdmissionContext, constraints?: TokenConstraint[]): Sequence[] {
  const r = a.req;
  const { model, tokenize } = ctx;
  const { logitBias, badWords, seed, ...sampling } = r.sampling;
  const baseSeed = seed ?? randomSeed();
  const banned = badWordsTokenIds(badWords ?? [], tokenize);
  const eos = new Set(model.eosTokenIds);
  // Jump-forward needs a constraint; forced tokens are not sampled, so they have no logprobs to give.
  const encode =
    ctx.config.jumpForward && constraints && r.logprobs === undefined
      ? (text: string) => tokenize.encode(text, false)
      : undefined;
  return Array.from({ length: r.n }, (_, i) => {
    const sampler = new SequenceSampler(
      {
        ...sampling,
        logitBias: logitBias ? new Map(logitBias) : undefined,
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
      constraints?.[i],
      encode,
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
