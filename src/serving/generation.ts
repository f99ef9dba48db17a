/**
 * What every generation route shares, end to end: refuse while draining → parse (the protocol's)
 * → request id → resolve the model → engine request (the protocol's) → run it → accumulate into
 * one response or stream chunks (the protocol's accumulator and streamer). A route adds only its
 * protocol parts by implementing the abstract members.
 */
import type { EngineEvent, EngineRequest } from "../core/types.ts";
import type { Engine, EngineModel } from "../engine/engine.ts";
import { ApiError, type ApiErrorBody, internalError, unavailable } from "../errors.ts";
import type { Logger } from "../observability/logger.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { ResponseContext } from "../protocol/output-parts.ts";
import {
  type AdmissionControl,
  type AdmissionTicket,
  REQUEST_LIMIT_DEFAULTS,
  type RequestLimits,
} from "./admission.ts";
import {
  type Caller,
  CLIENT_CLOSED,
  type GenerationEndpoint,
  type GenerationResult,
  type ServingContext,
} from "./context.ts";
import { EngineRun } from "./engine-run.ts";

export interface ServingDeps {
  engine: Engine;
  metrics: Metrics;
  logger: Logger;
  draining(): boolean;
  /** Templates sent in requests may be rendered (the operator's choice; off by default). */
  trustRequestChatTemplate?: boolean;
  /** tool_choice is only "none", as the service spec has it (--strict-tool-choice). */
  strictToolChoice?: boolean;
  /** Waiting-request and per-key limits; none when absent. */
  admission?: AdmissionControl;
  /** Per-request token limits and timeout (defaults: REQUEST_LIMIT_DEFAULTS). */
  limits?: Partial<RequestLimits>;
}

/** The fields the shared steps read from any parsed generation request. */
export interface GenerationRequest {
  model: string;
  stream: boolean;
}

/** Engine events (of prompt `prompt`, for routes with several) → one response (src/protocol's accumulators). */
export interface Accumulator<J> {
  push(event: EngineEvent, prompt: number): void;
  result(): J;
}

/** One streamed payload (src/protocol's StreamFrame, for any chunk type). */
export type Frame<C> = { type: "chunk"; data: C } | { type: "error"; error: ApiError; data: ApiErrorBody };

/** Engine events → stream payloads (src/protocol's streamers). */
export interface Streamer<C> {
  push(event: EngineEvent, prompt: number): Frame<C>[];
  fail(error: ApiError): Frame<C>;
}

/** The caller's share of the engine's admissions (fair share): its API key and project. */
function shareKey(caller: Caller | undefined): string {
  return JSON.stringify([caller?.keyId ?? null, caller?.team ?? null, caller?.project ?? null]);
}

/** The admission key of a caller: its API key. */
function admissionKey(caller: Caller | undefined): string {
  return caller?.keyId == null ? "" : String(caller.keyId);
}

/** A ticket that admits everything, for services run without admission control. */
const ALWAYS_ADMITTED: AdmissionTicket = { started() {}, release() {} };

/** The model a body names, kept for the usage row when the request fails before resolution. */
function requestedModel(body: unknown): string {
  const m = (body as { model?: unknown } | null)?.model;
  return typeof m === "string" && m.length > 0 && m.length <= 256 ? m : "";
}

export abstract class GenerationService<P extends GenerationRequest, J, C>
  implements GenerationEndpoint<J, C>
{
  protected readonly deps: ServingDeps;
  private readonly limits: RequestLimits;
  /** Names the request kind in log lines and error messages ("chat completion"). */
  protected abstract readonly label: string;

  constructor(deps: ServingDeps) {
    this.deps = deps;
    this.limits = { ...REQUEST_LIMIT_DEFAULTS, ...deps.limits };
  }

  /** The protocol's validated request (throws 400 ApiErrors); `caller` for what only it may read. */
  protected abstract parse(body: unknown, raw: string, caller: Caller | undefined): P;
  /** The request's fields worth a log line. */
  protected abstract logFields(req: P): Record<string, unknown>;
  /** One engine request per prompt (chat has one); their events reach the accumulator tagged. */
  protected abstract engineRequests(req: P, model: EngineModel, requestId: string): Promise<EngineRequest[]>;
  protected abstract accumulator(req: P, ctx: ResponseContext): Accumulator<J>;
  /** Whether and where the output holds reasoning; routes that parse none keep this default. */
  protected reasoning(_model: EngineModel, _requests: EngineRequest[]): ResponseContext["reasoning"] {
    return undefined;
  }
  protected abstract streamer(req: P, ctx: ResponseContext): Streamer<C>;

  /** Runs one request; failures are thrown as ApiErrors with the status the client gets. */
  async create(body: unknown, raw: string, ctx: ServingContext): Promise<GenerationResult<J, C>> {
    const tally = ctx.usage;
    tally.model = requestedModel(body);
    try {
      if (this.deps.draining()) throw unavailable("The server is shutting down.");
      const parsed = this.parse(body, raw, ctx.caller);
      // vLLM: the X-Request-Id header wins, then the body's request_id, else a generated one.
      const bodyId = (body as { request_id?: unknown } | null)?.request_id;
      if (!ctx.requestIdFromClient && typeof bodyId === "string" && bodyId) tally.requestId = bodyId;
      // `user` is the caller's end-user id (OpenAI: for abuse monitoring): it goes to the log.
      this.deps.logger.info(this.label, {
        request_id: tally.requestId,
        ...this.logFields(parsed),
        team: ctx.caller?.team,
        project: ctx.caller?.project,
      });
      const ticket = this.deps.admission?.admit(admissionKey(ctx.caller)) ?? ALWAYS_ADMITTED;
      try {
        return await this.generate(parsed, ctx, ticket);
      } catch (err) {
        ticket.release(ctx.usage.promptTokens + ctx.usage.completionTokens);
        throw err;
      }
    } catch (err) {
      if (err instanceof ApiError) throw err;
      this.deps.logger.error(`${this.label} failed`, {
        request_id: tally.requestId,
        error: String((err as Error).stack),
      });
      throw internalError(`${this.label} failed: ${(err as Error).message}`);
    }
  }

  /** The engine's token limits for a request, from the operator's (0: off). */
  protected tokenLimits(): EngineRequest["limits"] {
    const { maxPromptTokens, maxTotalTokens } = this.limits;
    return {
      ...(maxPromptTokens > 0 && { maxPromptTokens }),
      ...(maxTotalTokens > 0 && { maxTotalTokens }),
    };
  }

  private async generate(
    req: P,
    ctx: ServingContext,
    ticket: AdmissionTicket,
  ): Promise<GenerationResult<J, C>> {
    const tally = ctx.usage;
    // Usage is attributed to the model even when it then turns out to have no weights to serve.
    const resolution = await this.deps.engine.resolve(req.model);
    tally.model = resolution.model.id;
    tally.checkpoint = resolution.checkpoint ? `step${resolution.checkpoint.step}` : null;
    const model = this.deps.engine.model(resolution);
    const requests = await this.engineRequests(req, model, tally.requestId);
    for (const request of requests) {
      request.limits = this.tokenLimits();
      request.shareKey = shareKey(ctx.caller);
      this.deps.engine.check(model, request);
    }
    const run = new EngineRun(
      this.deps,
      requests.map((request) => ({ model, request })),
      ctx,
      { ticket, timeoutMs: this.limits.requestTimeoutMs },
    );
    const response: ResponseContext = {
      requestId: tally.requestId,
      model: model.name,
      toolParser: model.resolution.model.toolParser,
      reasoning: this.reasoning(model, requests),
    };
    if (req.stream) return this.streamed(run, this.streamer(req, response), ctx);

    const acc = this.accumulator(req, response);
    for await (const e of run.events()) acc.push(e.event, e.prompt);
    if (ctx.signal.aborted) {
      tally.status = CLIENT_CLOSED;
      return { kind: "closed" };
    }
    run.countTokens();
    const body = acc.result();
    tally.status = 200;
    return { kind: "json", body };
  }

  /** Waits for the first payload, so a failure before it is still a plain error with its status. */
  private async streamed(
    run: EngineRun,
    streamer: Streamer<C>,
    ctx: ServingContext,
  ): Promise<GenerationResult<J, C>> {
    const frames = this.frames(run, streamer, ctx);
    const first = await frames.next();
    return { kind: "stream", frames: resume(first, frames) };
  }

  private async *frames(
    run: EngineRun,
    streamer: Streamer<C>,
    ctx: ServingContext,
  ): AsyncGenerator<C | ApiErrorBody> {
    let started = false;
    try {
      for await (const e of run.events()) {
        for (const frame of streamer.push(e.event, e.prompt)) {
          if (frame.type === "error" && !started) throw frame.error;
          started = true;
          yield frame.data;
        }
      }
    } catch (err) {
      if (!started) throw err;
      // After the first chunk the status is sent: the error becomes the stream's last payload.
      const api =
        err instanceof ApiError ? err : internalError(`generation failed: ${(err as Error).message}`);
      ctx.usage.status = api.status;
      yield streamer.fail(api).data;
      return;
    }
    run.countTokens();
    ctx.usage.status = ctx.signal.aborted ? CLIENT_CLOSED : 200;
  }
}

/** The rest of a generator whose first result was already taken; closing it closes the generator. */
async function* resume<T>(first: IteratorResult<T>, rest: AsyncGenerator<T>): AsyncGenerator<T> {
  try {
    if (first.done) return;
    yield first.value;
    yield* rest;
  } finally {
    await rest.return(undefined);
  }
}
