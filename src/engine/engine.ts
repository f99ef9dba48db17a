/**
 * The in-process API, like vLLM's `LLM` class: `Engine.open()` builds the same worker pool,
 * scheduler, runner and sampler the HTTP server runs, and every way of generating — the server,
 * `ortserve chat`, the fidelity suite, the benchmarks — goes through it.
 *
 *   const engine = await Engine.open({ modelsDir: "models" });
 *   const out = await engine.generate({
 *     model: "smollm2-135m-instruct",
 *     prompt: { messages: [{ role: "user", content: "Hi!" }] },
 *     params: { maxTokens: 32, sampling: { temperature: 0 } },
 *   });
 *   console.log(out.choices[0].text);
 *   await engine.close();
 *
 * A prompt is text, token ids, or chat messages rendered by the model's template. Omitted
 * parameters take the model's generation_config, then vLLM's defaults. Failures are ApiErrors
 * (src/errors.ts): the same status, code and parameter the HTTP API reports.
 */

import { contentText } from "../chat/conversation.ts";
import {
  type RenderChatOptions,
  TEMPLATE_POOL_DEFAULTS,
  TemplatePool,
  type TemplatePoolOptions,
} from "../chat/index.ts";
import type { ChatMessage } from "../chat/types.ts";
import type { ModelFormat } from "../core/model/model-files.ts";
import { TokenizerThread } from "../core/prompt/tokenizer-thread.ts";
import { completeRequest, type GenerateParams } from "../core/request-defaults.ts";
import { completionRoom, contextExceeded } from "../core/step/admission.ts";
import { checkAgainstConfig } from "../core/step/config-checks.ts";
import { checkTokenIds } from "../core/token-ids.ts";
import type {
  EngineCoreConfig,
  EngineEvent,
  EngineRequest,
  FinishReason,
  KvCacheDtypeSetting,
  PromptTokenLogprob,
  TokenLogprob,
} from "../core/types.ts";
import {
  type ApiError,
  asApiErrors,
  engineErrorToApiError,
  internalError,
  modelNotFound,
  unavailable,
} from "../errors.ts";
import { availableFormats } from "../models/registry/weights.ts";
import { ModelRegistry, type RegistryChange, type Resolution } from "../models/registry.ts";
import { modelsDir as defaultModelsDir } from "../util/paths.ts";
import type { ThreadHeap } from "../util/thread-heap.ts";
import { EnginePool } from "../workers/pool.ts";
import { ChoiceTracker } from "./choice-tracker.ts";
import { forgetModelInfo, type ModelInfo, modelInfo } from "./model-info.ts";

export type { GenerateParams };

export interface EngineOptions {
  /** Directory of models to serve (default: $ORTSERVE_MODELS_DIR or <repo>/models). */
  modelsDir?: string;
  /** An already loaded registry (the server shares its own); overrides modelsDir. */
  registry?: ModelRegistry;
  /** Worker threads; each model is owned by one of them. */
  workers?: number;
  /** ONNX Runtime intra-op threads per worker. */
  threads?: number;
  /** Sequences decoded together per model. */
  maxNumSeqs?: number;
  /** Context limit per sequence (at most the model's). */
  maxModelLen?: number;
  /** Prompt tokens prefilled per step, shared by the prompts a step prefills. */
  prefillChunk?: number;
  /** Bytes each model's prefix cache may hold. */
  prefixCacheBytes?: number;
  /** Serve this weight format wherever a model has it (default: each model's own choice). */
  format?: ModelFormat;
  /** The KV cache's element type (default "auto": the weight format's; see EngineCoreConfig). */
  kvCacheDtype?: KvCacheDtypeSetting;
  /** Structured outputs: forced text joins without sampling (default: on). */
  jumpForward?: boolean;
  /** Milliseconds a new structured-output constraint may take to compile; 0: no budget. */
  grammarCompileTimeoutMs?: number;
  /** Admission alternates between callers (EngineRequest.shareKey) of equal priority (default: on). */
  fairShare?: boolean;
  /** Chat template rendering: its threads and each render's time and output budgets. */
  templates?: Partial<TemplatePoolOptions>;
  /** Told what each rescan of the models directory changed (the server logs it). */
  onModelsChange?: (change: RegistryChange) => void;
}

export const ENGINE_DEFAULTS = {
  // One worker with both cores for ONNX Runtime measured fastest on a 2-core box (bench/README.md).
  workers: 1,
  threads: 2,
  maxNumSeqs: 16,
  maxModelLen: 4096,
  prefillChunk: 256,
  prefixCacheBytes: 256 << 20,
  kvCacheDtype: "auto",
  jumpForward: true,
  // The JSONSchemaBench sample compiles in 8.7 ms at the median, 7.2 s at p99 (bench/README.md).
  grammarCompileTimeoutMs: 10_000,
  fairShare: true,
  templates: TEMPLATE_POOL_DEFAULTS,
} as const;

/** The prompt of a request: text, token ids, or chat messages for the model's template. */
export type PromptInput =
  | { text: string; addSpecialTokens?: boolean }
  | { tokenIds: number[] }
  | ({
      messages: ChatMessage[];
      addSpecialTokens?: boolean;
      /** The request keeps only the prompt's last tokens (truncate_prompt_tokens): no size refusal. */
      truncates?: boolean;
    } & Partial<Omit<RenderChatOptions, "messages">>);

export interface GenerateRequest {
  /** A model id, or "<id>:step<N>" for a checkpoint. */
  model: string;
  prompt: PromptInput;
  requestId?: string;
  params?: GenerateParams;
}

/** A served model as a request resolved it. */
export interface EngineModel {
  /** The name as requested ("id" or "id:step25"). */
  name: string;
  resolution: Resolution;
  info: ModelInfo;
  config: EngineCoreConfig;
}

/** A request ready for the workers. */
export interface PreparedRequest {
  model: EngineModel;
  request: EngineRequest;
}

export interface GeneratedChoice {
  index: number;
  text: string;
  tokenIds: number[];
  logprobs?: TokenLogprob[];
  finishReason?: FinishReason;
  stopReason?: number | string | null;
  /** Tokens inside the think block, with a request's `reasoning`. */
  reasoningTokens?: number;
}

export interface GenerateResult {
  model: string;
  requestId: string;
  promptTokenIds: number[];
  cachedTokens: number;
  promptLogprobs?: (PromptTokenLogprob | null)[];
  choices: GeneratedChoice[];
}

export interface ScoreRequest {
  model: string;
  prompt: PromptInput;
  /** Top alternatives per position besides the prompt token itself (default 0). */
  topLogprobs?: number;
  /** Also return the raw logits of every position (rows × vocab). */
  logits?: boolean;
}

export interface ScoreResult {
  model: string;
  promptTokenIds: number[];
  vocabSize: number;
  /** Position i: the logprob of prompt token i given the ones before (null for the first). */
  promptLogprobs: (PromptTokenLogprob | null)[];
  /** With `logits`: row i holds the logits after prompt token i. */
  logits?: Float32Array;
}

export interface RunOptions {
  signal?: AbortSignal;
  onEvent?: (event: EngineEvent) => void;
}

let requestCounter = 0;

/** A name the registry does not know rescans the models directory at most this often. */
const MISS_REFRESH_MS = 250;

/** One revision of a served directory: what the engine counts users and keeps tokenizers by. */
function servedKey(dir: string, revision: string): string {
  return `${revision}:${dir}`;
}

/** A stream of one error event: the request is refused before it reaches a worker. */
async function* refusal(err: ApiError): AsyncGenerator<EngineEvent> {
  yield { type: "error", code: "unavailable", message: err.message };
}

export class Engine {
  readonly registry: ModelRegistry;
  readonly pool: EnginePool;
  /** Every chat template render runs here, off the main thread. */
  readonly templates: TemplatePool;
  private readonly options: Required<
    Omit<EngineOptions, "registry" | "modelsDir" | "format" | "templates" | "onModelsChange">
  >;
  private readonly format: ModelFormat | undefined;
  private readonly onModelsChange: ((change: RegistryChange) => void) | undefined;
  /**
   * Users per model directory and revision (servedKey): open streams, and requests rendering or
   * tokenizing with its files; and who waits for a directory to have none.
   */
  private readonly users = new Map<string, number>();
  /** Revisions let go of (retire): a request resolved to one before it went is refused with a 503. */
  private readonly retired = new Set<string>();
  private readonly idleWaiters = new Map<string, (() => void)[]>();
  /** Per model directory and revision, a tokenizer thread for /tokenize, /detokenize and count_tokens. */
  private readonly tokenizers = new Map<string, TokenizerThread>();
  /** Directories being let go of (refreshModels): close waits for them before the workers stop. */
  private readonly retiring = new Set<Promise<void>>();
  /** The scan of the models directory under way, if any (refreshModels). */
  private refreshing: Promise<unknown> = Promise.resolve();
  /** A scan asked for while another runs: it starts when that one ends. */
  private queuedRefresh: Promise<RegistryChange> | undefined;
  /** When a name the registry did not know last made it scan the models directory again. */
  private lastMissRefresh = Number.NEGATIVE_INFINITY;

  private constructor(registry: ModelRegistry, options: EngineOptions) {
    this.registry = registry;
    this.options = {
      workers: options.workers ?? ENGINE_DEFAULTS.workers,
      threads: options.threads ?? ENGINE_DEFAULTS.threads,
      maxNumSeqs: options.maxNumSeqs ?? ENGINE_DEFAULTS.maxNumSeqs,
      maxModelLen: options.maxModelLen ?? ENGINE_DEFAULTS.maxModelLen,
      prefillChunk: options.prefillChunk ?? ENGINE_DEFAULTS.prefillChunk,
      prefixCacheBytes: options.prefixCacheBytes ?? ENGINE_DEFAULTS.prefixCacheBytes,
      kvCacheDtype: options.kvCacheDtype ?? ENGINE_DEFAULTS.kvCacheDtype,
      jumpForward: options.jumpForward ?? ENGINE_DEFAULTS.jumpForward,
      grammarCompileTimeoutMs: options.grammarCompileTimeoutMs ?? ENGINE_DEFAULTS.grammarCompileTimeoutMs,
      fairShare: options.fairShare ?? ENGINE_DEFAULTS.fairShare,
    };
    this.format = options.format;
    this.onModelsChange = options.onModelsChange;
    this.pool = new EnginePool({ workers: this.options.workers, maxRequestsPerWorker: 1024 });
    this.templates = new TemplatePool(options.templates);
  }

  /** Models load in their worker on first use. */
  static async open(options: EngineOptions = {}): Promise<Engine> {
    return new Engine(options.registry ?? ModelRegistry.load(defaultModelsDir(options.modelsDir)), options);
  }

  /**
   * Resolves a model name; a 404 ApiError when unknown. A name not known yet makes the registry
   * scan the models directory again (at most every MISS_REFRESH_MS): a model pulled while the
   * server runs is served by its first request.
   */
  async resolve(name: string): Promise<Resolution> {
    let resolution = this.registry.resolve(name);
    if (!resolution && performance.now() - this.lastMissRefresh >= MISS_REFRESH_MS) {
      this.lastMissRefresh = performance.now();
      try {
        await this.refreshModels();
      } catch {
        // The server's periodic scan logs the same failure; this name is simply not known.
      }
      resolution = this.registry.resolve(name);
    }
    if (!resolution) throw modelNotFound(name);
    return resolution;
  }

  /**
   * Scans the models directory again, changed directories on a thread of their own. Scans run one
   * at a time; calls while one waits to start share it. What was loaded from a directory that is gone or was replaced (a model removed, or
   * pulled again at the same path) is freed once the requests using it finish; requests resolved
   * from now on load the new files.
   */
  refreshModels(): Promise<RegistryChange> {
    if (this.queuedRefresh) return this.queuedRefresh;
    const next = this.refreshing
      .then(() => {
        this.queuedRefresh = undefined;
        return this.registry.refreshOffThread();
      })
      .then((change) => this.settle(change));
    this.queuedRefresh = next;
    this.refreshing = next.catch(() => undefined);
    return next;
  }

  private settle(change: RegistryChange): RegistryChange {
    for (const { dir, revision } of change.gone) {
      const retired = this.retire(dir, revision)
        // A worker that cannot unload has died and been replaced: nothing of it is left to free.
        .catch(() => {})
        .finally(() => this.retiring.delete(retired));
      this.retiring.add(retired);
    }
    if (change.added.length + change.removed.length + change.gone.length > 0) this.onModelsChange?.(change);
    return change;
  }

  /**
   * Frees a revision once its users are done. A request resolved to it that had not started using
   * it by then is refused (stream, tokenizer): its prompt was made for files no longer served.
   */
  private async retire(dir: string, revision: string): Promise<void> {
    const key = servedKey(dir, revision);
    // Marked in the same turn as the last check for users: nothing starts on it in between.
    await this.idle(dir, revision, () => this.retired.add(key));
    await this.pool.unload(dir, revision);
    forgetModelInfo(dir, revision);
    const tokenizer = this.tokenizers.get(key);
    this.tokenizers.delete(key);
    await tokenizer?.close();
  }

  /** `model`'s revision counted as in use while `work` runs (retire waits for it). */
  private async using<T>(model: EngineModel, work: () => Promise<T>): Promise<T> {
    const { modelDir, revision } = model.config;
    const key = servedKey(modelDir, revision ?? "");
    this.hold(key);
    try {
      return await work();
    } finally {
      this.drop(modelDir, key);
    }
  }

  private hold(key: string): void {
    this.users.set(key, (this.users.get(key) ?? 0) + 1);
  }

  private drop(dir: string, key: string): void {
    const left = (this.users.get(key) ?? 1) - 1;
    if (left > 0) this.users.set(key, left);
    else {
      this.users.delete(key);
      for (const wake of this.idleWaiters.get(dir) ?? []) wake();
      this.idleWaiters.delete(dir);
    }
  }

  /** The 503 of a request resolved to a revision that has since been replaced or removed. */
  private replaced(model: EngineModel): ApiError {
    return unavailable(`${model.name} was replaced while this request was being prepared; send it again.`);
  }

  /**
   * The served model of a name, or of a resolution already made (so a request resolves its name
   * once); a 404 ApiError when unknown, a 503 when it has no weights.
   */
  model(name: string | Resolution): EngineModel {
    const resolution = typeof name === "string" ? this.registry.resolve(name) : name;
    if (!resolution) throw modelNotFound(name as string);
    if (!resolution.format) {
      // The problem names server paths: it goes to the server's log at start, not to clients.
      throw unavailable(
        resolution.checkpoint?.problem
          ? `${resolution.servedName} cannot be served: its model files failed the start-time check (see the server log).`
          : `${resolution.servedName} has no converted weights to serve.`,
      );
    }
    const format =
      this.format && availableFormats(resolution.dir).includes(this.format) ? this.format : resolution.format;
    const o = this.options;
    return {
      name: resolution.servedName,
      resolution,
      info: modelInfo(resolution.dir, resolution.revision),
      config: {
        modelDir: resolution.dir,
        revision: resolution.revision,
        format,
        schedulingPolicy: resolution.model.schedulingPolicy,
        maxNumSeqs: o.maxNumSeqs,
        maxModelLen: Math.min(o.maxModelLen, resolution.model.maxModelLen ?? Number.POSITIVE_INFINITY),
        prefillChunk: o.prefillChunk,
        prefixCacheBytes: o.prefixCacheBytes,
        intraOpThreads: o.threads,
        kvCacheDtype: o.kvCacheDtype,
        jumpForward: o.jumpForward,
        grammarCompileTimeoutMs: o.grammarCompileTimeoutMs,
        fairShare: o.fairShare,
      },
    };
  }

  /** The engine's prompt for a request's: chat messages go through the model's template. */
  async prompt(model: EngineModel, input: PromptInput): Promise<EngineRequest["prompt"]> {
    return this.using(model, () => this.render(model, input));
  }

  private async render(model: EngineModel, input: PromptInput): Promise<EngineRequest["prompt"]> {
    if ("tokenIds" in input) return { tokenIds: input.tokenIds };
    if ("text" in input) return { text: input.text, addSpecialTokens: input.addSpecialTokens ?? true };
    const { messages, addSpecialTokens, truncates, ...chat } = input;
    // The size check's tokenizer loads with the model's first chat, not during a later attack.
    this.tokenizer(model)
      .info()
      .catch(() => {});
    if (!truncates) await this.refuseOversized(model, messages);
    // Debt: a prompt made long by other messages than the last user one is refused by size only
    // in the worker, after it was rendered here.
    const rendered = await this.templates.render(model.info.chatSource, {
      ...chat,
      messages,
      addGenerationPrompt: chat.addGenerationPrompt ?? true,
      continueFinalMessage: chat.continueFinalMessage ?? false,
    });
    // The template spells out its special tokens (vLLM's chat default add_special_tokens=false).
    return { text: rendered.text, addSpecialTokens: addSpecialTokens ?? false };
  }

  /**
   * Before rendering: the last user message alone holds more tokens than the context (every token
   * stands for at most maxBytesPerToken bytes, and a string has at least as many bytes as UTF-16
   * units). Templates render it, trimmed at most, so the size alone decides; rendering megabytes
   * through a template, then copying them to the worker, would be work for a refusal.
   */
  private async refuseOversized(model: EngineModel, messages: readonly ChatMessage[]): Promise<void> {
    const last = messages.findLast((m) => m.role === "user");
    const text = last === undefined ? "" : contentText(last.content).trim();
    const L = model.config.maxModelLen;
    // Fewer characters than the context cannot exceed it: the tokenizer is not even asked.
    if (text.length <= L) return;
    const { maxBytesPerToken } = await this.tokenizer(model).info();
    const atLeast = maxBytesPerToken ? Math.ceil(text.length / maxBytesPerToken) : 0;
    if (atLeast > L)
      asApiErrors(() => {
        throw contextExceeded(L, atLeast);
      });
  }

  /** Resolves the model, builds the prompt and completes the parameters with the model's defaults. */
  async prepare(req: GenerateRequest): Promise<PreparedRequest> {
    const model = this.model(req.model);
    const prompt = await this.prompt(model, req.prompt);
    const requestId = req.requestId ?? `ortserve-${process.pid}-${++requestCounter}`;
    return {
      model,
      request: asApiErrors(() =>
        completeRequest(requestId, prompt, req.params, model.info.generationDefaults),
      ),
    };
  }

  /**
   * The checks a request can fail against its model's engine configuration alone (n, priority),
   * made here as well as in the worker so nothing is sized by a request the engine would refuse.
   */
  check(model: EngineModel, request: EngineRequest): void {
    asApiErrors(() => {
      checkAgainstConfig(request, model.config);
      // A prompt of token ids that cannot fit is refused by its length here, before its ids (a
      // hostile 100,000) are copied to the engine's thread, whose turn every stream waits for.
      if ("tokenIds" in request.prompt && request.truncatePromptTokens === undefined)
        completionRoom(request, request.prompt.tokenIds.length, model.config.maxModelLen);
    });
  }

  /**
   * The request's events as they happen; always ends with `done` or `error` (or when aborted).
   * The request counts as using its model directory from this call until the stream ends, so
   * iterate (or return) every stream.
   */
  stream(prepared: PreparedRequest, signal?: AbortSignal): AsyncGenerator<EngineEvent> {
    const { modelDir, revision } = prepared.model.config;
    const key = servedKey(modelDir, revision ?? "");
    if (this.retired.has(key)) return refusal(this.replaced(prepared.model));
    this.hold(key);
    return this.counted(modelDir, key, this.pool.generate(prepared.model.config, prepared.request, signal));
  }

  private async *counted(
    dir: string,
    key: string,
    events: AsyncGenerator<EngineEvent>,
  ): AsyncGenerator<EngineEvent> {
    try {
      yield* events;
    } finally {
      this.drop(dir, key);
    }
  }

  /**
   * Waits until no request uses `modelDir` (of that revision, when given; requests already
   * streaming finish first), then frees its engines in their workers. For weights about to be
   * removed or replaced: a new request for them would load them again.
   */
  async release(modelDir: string, revision?: string): Promise<void> {
    await this.idle(modelDir, revision);
    await this.pool.unload(modelDir, revision);
  }

  /**
   * Resolves once no request uses `modelDir` (of that revision, when given), calling `then` first
   * in the same turn as the check that found none.
   */
  private async idle(modelDir: string, revision?: string, then?: () => void): Promise<void> {
    const inUse = () =>
      revision === undefined
        ? [...this.users.keys()].some((key) => key.slice(key.indexOf(":") + 1) === modelDir)
        : this.users.has(servedKey(modelDir, revision));
    while (inUse())
      await new Promise<void>((wake) => {
        const waiters = this.idleWaiters.get(modelDir) ?? [];
        waiters.push(wake);
        this.idleWaiters.set(modelDir, waiters);
      });
    then?.();
  }

  /** Runs a request to the end and collects its choices; an error event throws its ApiError. */
  async generate(req: GenerateRequest | PreparedRequest, opts: RunOptions = {}): Promise<GenerateResult> {
    const prepared = "request" in req ? req : await this.prepare(req);
    const tracker = new ChoiceTracker(prepared.request.n, { keepOutput: true });
    for await (const e of this.stream(prepared, opts.signal)) {
      opts.onEvent?.(e);
      if (e.type === "error") throw engineErrorToApiError(e);
      tracker.push(e);
    }
    const prompt = tracker.prompt;
    return {
      model: prepared.model.name,
      requestId: prepared.request.requestId,
      promptTokenIds: prompt?.promptTokenIds ?? [],
      cachedTokens: prompt?.cachedTokens ?? 0,
      ...(prompt?.promptLogprobs && { promptLogprobs: prompt.promptLogprobs }),
      // A prompt that only scored (no tokens to generate) reports no choices.
      choices: tracker.choices.flatMap((c, index): GeneratedChoice[] =>
        c.reported
          ? [
              {
                index,
                text: c.text,
                tokenIds: c.tokenIds,
                ...(c.logprobs && { logprobs: c.logprobs }),
                ...(c.finish && { finishReason: c.finish.reason, stopReason: c.finish.stopReason }),
                ...(c.finish?.reasoningTokens !== undefined && { reasoningTokens: c.finish.reasoningTokens }),
              },
            ]
          : [],
      ),
    };
  }

  /** Log-likelihoods of a prompt's tokens, with no generation (prompt logprobs, optionally raw logits). */
  async score(req: ScoreRequest, opts: RunOptions = {}): Promise<ScoreResult> {
    const model = this.model(req.model);
    const prompt = await this.prompt(model, req.prompt);
    const prepared: PreparedRequest = {
      model,
      request: completeRequest(`score-${process.pid}-${++requestCounter}`, prompt, {
        maxTokens: 0,
        sampling: { temperature: 0 },
        promptLogprobs: req.topLogprobs ?? 0,
        promptLogits: req.logits,
      }),
    };
    let result: ScoreResult | undefined;
    for await (const e of this.stream(prepared, opts.signal)) {
      opts.onEvent?.(e);
      if (e.type === "error") throw engineErrorToApiError(e);
      if (e.type === "prompt")
        result = {
          model: model.name,
          promptTokenIds: e.promptTokenIds,
          vocabSize: model.info.vocabSize,
          promptLogprobs: e.promptLogprobs ?? [],
          logits: e.promptLogits,
        };
    }
    if (!result) throw internalError("scoring ended without a result");
    return result;
  }

  /** Each loaded model's engine statistics, from whichever worker owns it. */
  stats(): Promise<Record<string, unknown>> {
    return this.pool.stats();
  }

  /** Each engine worker's V8 heap (bytes in use and committed), by worker index. */
  heapStatistics(): Promise<ThreadHeap[]> {
    return this.pool.heapStatistics();
  }

  /** A prompt's token ids as the model would see them (a chat prompt renders first: see prompt()). */
  async tokenize(model: EngineModel, prompt: EngineRequest["prompt"]): Promise<number[]> {
    if ("tokenIds" in prompt) return prompt.tokenIds;
    const ids = await this.using(model, () =>
      this.tokenizer(model).prompt(prompt.text, prompt.addSpecialTokens ?? true, Number.MAX_SAFE_INTEGER),
    );
    if (!("ids" in ids)) throw internalError("The tokenizer stopped before the end of the prompt.");
    return ids.ids;
  }

  /** Token ids → their text, special tokens included; ids outside the vocabulary are a 400. */
  async detokenize(model: EngineModel, ids: number[]): Promise<string> {
    asApiErrors(() => checkTokenIds("tokens", ids, model.info.vocabSize));
    return ids.length === 0 ? "" : this.using(model, () => this.tokenizer(model).decode(ids));
  }

  private tokenizer(model: EngineModel): TokenizerThread {
    const { modelDir, revision } = model.config;
    const key = servedKey(modelDir, revision ?? "");
    // Its files are gone or another model's: a thread now would read those under this revision.
    if (this.retired.has(key)) throw this.replaced(model);
    let t = this.tokenizers.get(key);
    if (!t) {
      t = new TokenizerThread(modelDir);
      this.tokenizers.set(key, t);
    }
    return t;
  }

  async close(): Promise<void> {
    await this.refreshing;
    await Promise.all(this.retiring);
    await Promise.all([
      this.pool.close(),
      this.templates.close(),
      ...[...this.tokenizers.values()].map((t) => t.close()),
    ]);
  }
}
