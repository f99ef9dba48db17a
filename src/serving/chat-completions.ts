/**
 * One chat completion end to end: validate → resolve the model → render the chat template →
 * engine request → stream or accumulate the engine's events → usage record → response.
 * Cancellation: a client that disconnects aborts its generation at once.
 */
import type { Request, Response } from "express";
import { renderChat } from "../chat/index.ts";
import type { EngineCoreConfig, EngineEvent } from "../core/types.ts";
import { ApiError, internalError, modelNotFound, unavailable } from "../errors.ts";
import { SseWriter } from "../http/sse.ts";
import type { ModelRegistry } from "../models/registry.ts";
import type { Logger } from "../observability/logger.ts";
import type { Metrics } from "../observability/metrics.ts";
import { type ChatCompletionRequest, parseChatCompletionRequest } from "../protocol/chat-request.ts";
import { ChatCompletionAccumulator } from "../protocol/response.ts";
import { ChatCompletionStreamer } from "../protocol/stream.ts";
import { toEngineRequest } from "../protocol/to-engine.ts";
import type { Storage } from "../storage/storage.ts";
import type { EnginePool } from "../workers/pool.ts";
import { modelInfo } from "./model-info.ts";

export interface ChatServiceDeps {
  registry: ModelRegistry;
  pool: EnginePool;
  storage: Storage;
  metrics: Metrics;
  logger: Logger;
  engineConfig(
    dir: string,
    format: "q4" | "fp32",
    policy: "fcfs" | "priority",
    maxModelLen?: number,
  ): EngineCoreConfig;
  draining(): boolean;
}

/** The model a request body names, for usage records of requests that failed before resolution. */
function modelNamed(body: unknown): string | undefined {
  const m = (body as { model?: unknown } | null)?.model;
  return typeof m === "string" && m.length > 0 && m.length <= 256 ? m : undefined;
}

/** Status recorded for a client that went away before the response completed (nginx's convention). */
const CLIENT_CLOSED = 499;

interface Tally {
  model: string;
  checkpoint: string | null;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

export class ChatCompletionsService {
  private readonly deps: ChatServiceDeps;

  constructor(deps: ChatServiceDeps) {
    this.deps = deps;
  }

  async handle(body: unknown, raw: string, req: Request, res: Response): Promise<void> {
    const started = performance.now();
    const tally: Tally = {
      model: "",
      checkpoint: null,
      promptTokens: 0,
      completionTokens: 0,
      cachedTokens: 0,
    };
    let requestId = req.requestId!;
    res.locals.usageRecorded = true;
    const record = (status: number) => {
      const caller = req.caller;
      try {
        this.deps.storage.usage.recordUsage({
          keyId: caller?.keyId ?? undefined,
          team: caller?.team ?? undefined,
          project: caller?.project ?? undefined,
          model: tally.model || modelNamed(body) || "(unresolved)",
          checkpoint: tally.checkpoint ?? undefined,
          requestId,
          promptTokens: tally.promptTokens,
          completionTokens: tally.completionTokens,
          cachedTokens: tally.cachedTokens,
          latencyMs: Math.round(performance.now() - started),
          status,
        });
      } catch (err) {
        this.deps.logger.error("usage record failed", { request_id: requestId, error: String(err) });
      }
    };
    try {
      if (this.deps.draining()) throw unavailable("The server is shutting down.");
      const parsed = parseChatCompletionRequest(body, raw);
      // vLLM: the X-Request-Id header wins, then the body's request_id, else a generated one.
      const bodyId = (body as { request_id?: unknown } | null)?.request_id;
      if (!req.get("x-request-id") && typeof bodyId === "string" && bodyId) {
        requestId = bodyId;
        req.requestId = bodyId;
        res.setHeader("X-Request-Id", bodyId);
      }
      // `user` is the caller's end-user id (OpenAI: for abuse monitoring): it goes to the log.
      this.deps.logger.info("chat completion", {
        request_id: requestId,
        model: parsed.model,
        user: parsed.user,
        stream: parsed.stream,
        n: parsed.n,
        team: req.caller?.team,
        project: req.caller?.project,
      });
      await this.generate(parsed, requestId, tally, req, res, record);
    } catch (err) {
      const api =
        err instanceof ApiError ? err : internalError(`chat completion failed: ${(err as Error).message}`);
      if (!(err instanceof ApiError))
        this.deps.logger.error("chat completion failed", {
          request_id: requestId,
          error: String((err as Error).stack),
        });
      record(api.status);
      throw api;
    }
  }

  private async generate(
    parsed: ChatCompletionRequest,
    requestId: string,
    tally: Tally,
    req: Request,
    res: Response,
    record: (status: number) => void,
  ): Promise<void> {
    const resolved = this.deps.registry.resolve(parsed.model);
    if (!resolved) throw modelNotFound(parsed.model);
    tally.model = resolved.model.id;
    tally.checkpoint = resolved.checkpoint ? `step${resolved.checkpoint.step}` : null;
    if (!resolved.format) throw unavailable(`${resolved.servedName} has no converted weights to serve.`);
    const info = modelInfo(resolved.dir);
    const rendered = renderChat(info.chatSource, {
      messages: parsed.messages,
      chatTemplate: parsed.chat_template,
      chatTemplateKwargs: parsed.chat_template_kwargs,
      addGenerationPrompt: parsed.add_generation_prompt,
      continueFinalMessage: parsed.continue_final_message,
      tools: parsed.tools,
      documents: parsed.documents,
      reasoningEffort: parsed.reasoning_effort,
    });
    const engineRequest = toEngineRequest(parsed, {
      requestId,
      prompt: { text: rendered.text, addSpecialTokens: parsed.add_special_tokens },
      vocabSize: info.vocabSize,
      generationDefaults: info.generationDefaults,
    });
    const config = this.deps.engineConfig(
      resolved.dir,
      resolved.format,
      resolved.model.schedulingPolicy,
      resolved.model.maxModelLen,
    );
    const abort = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) abort.abort();
    });
    const ctx = { requestId, model: resolved.servedName };
    const t0 = performance.now();
    let firstToken = true;
    const observe = (e: EngineEvent) => {
      if (e.type === "prompt") {
        tally.promptTokens = e.promptTokenIds.length;
        tally.cachedTokens = e.cachedTokens;
      } else if (e.type === "delta" && firstToken) {
        firstToken = false;
        this.deps.metrics.ttft.observe((performance.now() - t0) / 1000, { model: tally.model });
      } else if (e.type === "finish") tally.completionTokens += e.completionTokens;
    };
    const events = this.deps.pool.generate(config, engineRequest, abort.signal);
    const m = this.deps.metrics;
    const countTokens = () => {
      m.promptTokens.inc({ model: tally.model }, tally.promptTokens);
      m.completionTokens.inc({ model: tally.model }, tally.completionTokens);
      m.cachedTokens.inc({ model: tally.model }, tally.cachedTokens);
    };

    if (!parsed.stream) {
      const acc = new ChatCompletionAccumulator(parsed, ctx);
      for await (const e of events) {
        observe(e);
        acc.push(e);
      }
      if (abort.signal.aborted) {
        record(CLIENT_CLOSED);
        return;
      }
      countTokens();
      const body = acc.result();
      record(200);
      res.json(body);
      return;
    }

    const streamer = new ChatCompletionStreamer(parsed, ctx);
    const sse = new SseWriter(res);
    try {
      for await (const e of events) {
        observe(e);
        for (const frame of streamer.push(e)) {
          if (frame.type === "error" && !sse.isStarted) throw frame.error;
          sse.send(frame.data);
        }
      }
    } catch (err) {
      if (!sse.isStarted) throw err;
      // After the first chunk the status is sent: the error becomes an SSE error event.
      const api =
        err instanceof ApiError ? err : internalError(`generation failed: ${(err as Error).message}`);
      sse.send(streamer.fail(api).data);
      record(api.status);
      sse.done();
      return;
    }
    countTokens();
    record(abort.signal.aborted ? CLIENT_CLOSED : 200);
    if (!abort.signal.aborted) sse.done();
    void req;
  }
}
