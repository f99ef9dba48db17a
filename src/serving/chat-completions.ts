/**
 * One chat completion end to end: validate → resolve the model → render the chat template →
 * engine request → stream or accumulate the engine's events → usage record → response.
 * Cancellation: a client that disconnects aborts its generation at once.
 */
import type { Request, Response } from "express";
import type { EngineEvent } from "../core/types.ts";
import type { Engine } from "../engine/engine.ts";
import { ApiError, internalError, unavailable } from "../errors.ts";
import { SseWriter } from "../http/sse.ts";
import type { Logger } from "../observability/logger.ts";
import type { Metrics } from "../observability/metrics.ts";
import { type ChatCompletionRequest, parseChatCompletionRequest } from "../protocol/chat-request.ts";
import { ChatCompletionAccumulator } from "../protocol/response.ts";
import { ChatCompletionStreamer } from "../protocol/stream.ts";
import { toEngineRequest } from "../protocol/to-engine.ts";
import type { Storage } from "../storage/storage.ts";

export interface ChatServiceDeps {
  engine: Engine;
  storage: Storage;
  metrics: Metrics;
  logger: Logger;
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
    const engine = this.deps.engine;
    // Usage is attributed to the model even when it then turns out to have no weights to serve.
    const resolution = engine.registry.resolve(parsed.model);
    if (resolution) {
      tally.model = resolution.model.id;
      tally.checkpoint = resolution.checkpoint ? `step${resolution.checkpoint.step}` : null;
    }
    const model = engine.model(parsed.model);
    const prompt = engine.prompt(model, {
      messages: parsed.messages,
      chatTemplate: parsed.chat_template,
      chatTemplateKwargs: parsed.chat_template_kwargs,
      addGenerationPrompt: parsed.add_generation_prompt,
      continueFinalMessage: parsed.continue_final_message,
      tools: parsed.tools,
      documents: parsed.documents,
      reasoningEffort: parsed.reasoning_effort,
      addSpecialTokens: parsed.add_special_tokens,
    });
    const engineRequest = toEngineRequest(parsed, {
      requestId,
      prompt,
      vocabSize: model.info.vocabSize,
      generationDefaults: model.info.generationDefaults,
    });
    const abort = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) abort.abort();
    });
    const ctx = { requestId, model: model.name };
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
    const events = engine.stream({ model, request: engineRequest }, abort.signal);
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
