/**
 * The HTTP application: routes, middleware order and the single place where errors become
 * responses. Handlers stay thin: JSON in, JSON or SSE out; the work happens in src/serving/.
 */
import express, { type NextFunction, type Request, type Response } from "express";
import {
  ApiError,
  internalError,
  methodNotAllowed,
  modelNotFound,
  notFound,
  payloadTooLarge,
  unavailable,
} from "../errors.ts";
import { listCheckpoints } from "../models/checkpoints.ts";
import type { ModelRegistry } from "../models/registry.ts";
import type { Logger } from "../observability/logger.ts";
import type { Metrics } from "../observability/metrics.ts";
import { type DeleteCheckpointsResponse, parseDeleteCheckpoints } from "../protocol/checkpoint-delete.ts";
import { buildOpenApiDocument } from "../protocol/openapi.ts";
import type { Caller, GenerationEndpoint } from "../serving/context.ts";
import type { ApiKeys } from "../storage/api-keys.ts";
import { allowedMethods } from "./allowed-methods.ts";
import { authenticate } from "./auth.ts";
import { generationRoute } from "./generation-route.ts";
import { type JsonBody, jsonBody } from "./json-body.ts";
import { requestContext } from "./request-context.ts";
import { anthropicDialect, openaiDialect, responsesDialect, type StreamDialect } from "./stream-dialect.ts";
import { UsageRecorder, type UsageStore } from "./usage.ts";

/** Paths that answer in Anthropic's shapes, errors included. */
const ANTHROPIC_PATHS = new Set(["/v1/messages", "/v1/messages/count_tokens"]);

function dialectOf(path: string): StreamDialect {
  if (ANTHROPIC_PATHS.has(path)) return anthropicDialect;
  return path === "/v1/responses" ? responsesDialect : openaiDialect;
}

export interface AppDeps {
  registry: ModelRegistry;
  keys: ApiKeys;
  /** Where usage rows go (one per request to a generation route). */
  usage: UsageStore;
  chat: GenerationEndpoint;
  completions: GenerationEndpoint;
  /** The Anthropic Messages route, and its count_tokens. */
  messages: GenerationEndpoint & { countTokens(body: unknown): Promise<{ input_tokens: number }> };
  /** The OpenAI Responses route, and its stored responses (retrieve, input items, delete). */
  responses: GenerationEndpoint & {
    retrieve(id: string, caller: Caller | undefined, query: Record<string, unknown>): unknown;
    inputItems(id: string, caller: Caller | undefined, query: Record<string, unknown>): unknown;
    remove(id: string, caller: Caller | undefined): Promise<unknown>;
  };
  /** vLLM's /tokenize and /detokenize. */
  tokenizer: {
    tokenize(body: unknown): Promise<unknown>;
    detokenize(body: unknown): Promise<unknown>;
  };
  /** Removes a model's checkpoints by step (src/serving/checkpoint-removal.ts). */
  checkpoints: { remove(modelId: string, steps: readonly number[]): DeleteCheckpointsResponse };
  metrics: Metrics;
  logger: Logger;
  /** Engine-side gauges, refreshed before /metrics renders. */
  refreshEngineMetrics(): Promise<void>;
  maxBodyBytes: number;
  /** True once SIGTERM arrived: new work is refused while in-flight requests finish. */
  draining(): boolean;
  /** /metrics needs a key too (default: open, for scrapers on a private network). */
  metricsRequireKey?: boolean;
}

function isClientBodyError(err: unknown): err is { status: number; message: string } {
  const e = err as { status?: unknown; expose?: unknown };
  return typeof e?.status === "number" && e.status >= 400 && e.status < 500 && e.expose === true;
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("query parser", "simple");
  app.use(requestContext(deps.logger, deps.metrics));
  app.use((_req, res, next) => {
    // While draining, every response closes its connection so shutdown does not wait for keep-alive.
    if (deps.draining()) res.setHeader("Connection", "close");
    next();
  });

  app.get("/health", (_req, res) => {
    res.status(deps.draining() ? 503 : 200).json({ status: deps.draining() ? "draining" : "ok" });
  });
  const metrics = async (_req: Request, res: Response, next: NextFunction) => {
    try {
      await deps.refreshEngineMetrics();
      res.type("text/plain; version=0.0.4").send(deps.metrics.render());
    } catch (err) {
      next(err);
    }
  };
  if (!deps.metricsRequireKey) app.get("/metrics", metrics);

  // Generation routes (POST, JSON in, JSON or SSE out) record one usage row per request.
  const generation = [
    { path: "/v1/chat/completions", service: deps.chat },
    { path: "/v1/completions", service: deps.completions },
    { path: "/v1/messages", service: deps.messages },
    { path: "/v1/responses", service: deps.responses },
  ];
  const usage = new UsageRecorder(deps.usage, deps.logger);
  app.use(usage.armFor(generation.map((r) => ({ method: "POST", path: r.path }))));

  // A method a known path does not answer is a 405 before the key and the project headers are read:
  // no header of the request can make it any other answer.
  app.use((req, _res, next) => {
    const allow = allowedMethods(req.path);
    if (allow && !allow.includes(req.method)) throw methodNotAllowed(req.method, req.path, allow);
    next();
  });

  // Everything below needs a key, unknown paths included.
  app.use(authenticate(deps.keys, (path) => ANTHROPIC_PATHS.has(path)));
  if (deps.metricsRequireKey) app.get("/metrics", metrics);
  app.get("/openapi.json", (_req, res) => {
    res.json(buildOpenApiDocument());
  });

  // Routes carry their full /v1 paths so metrics label them the same on success and on error.
  const v1 = app;

  v1.get("/v1/models", (_req, res) => {
    const data = deps.registry.list().flatMap((m) => [
      { id: m.id, object: "model", created: m.created, owned_by: "ortserve" },
      // A checkpoint whose files failed the start-time check is listed under its model's
      // checkpoints, not offered as a model to request.
      ...m.checkpoints
        .filter((c) => c.problem === undefined)
        .map((c) => ({
          id: `${m.id}:step${c.step}`,
          object: "model",
          created: c.created,
          owned_by: "ortserve",
          parent: m.id,
        })),
    ]);
    res.json({ object: "list", data });
  });

  v1.get("/v1/preview/models/:modelId/checkpoints", (req, res) => {
    const modelId = String(req.params.modelId);
    const model = deps.registry.get(modelId);
    if (!model) throw modelNotFound(modelId);
    res.json(listCheckpoints(model, req.query as Record<string, unknown>));
  });

  v1.delete("/v1/preview/models/:modelId/checkpoints", jsonBody(deps.maxBodyBytes), (req, res) => {
    const steps = parseDeleteCheckpoints((req.body as JsonBody).value);
    res.json(deps.checkpoints.remove(String(req.params.modelId), steps));
  });

  for (const r of generation)
    v1.post(
      r.path,
      usage.onRoute,
      jsonBody(deps.maxBodyBytes),
      generationRoute(r.service, dialectOf(r.path)),
    );

  // Stored responses: only the key that created one sees it.
  const stored = deps.responses;
  type StoredAction = (id: string, caller: Caller | undefined, query: Record<string, unknown>) => unknown;
  const storedRoutes: [method: "get" | "delete", path: string, action: StoredAction][] = [
    ["get", "/v1/responses/:responseId", (id, caller, query) => stored.retrieve(id, caller, query)],
    [
      "get",
      "/v1/responses/:responseId/input_items",
      (id, caller, query) => stored.inputItems(id, caller, query),
    ],
    ["delete", "/v1/responses/:responseId", (id, caller) => stored.remove(id, caller)],
  ];
  for (const [method, path, action] of storedRoutes)
    v1[method](path, async (req, res) => {
      res.json(await action(String(req.params.responseId), req.caller, req.query as Record<string, unknown>));
    });

  // Prompt-only routes: the model's template and tokenizer, nothing generated (no usage row).
  const promptRoute =
    (handler: (body: unknown) => Promise<unknown>) =>
    async (req: Request, res: Response): Promise<void> => {
      if (deps.draining()) throw unavailable("The server is shutting down.");
      res.json(await handler((req.body as JsonBody).value));
    };
  const promptRoutes: [string, (body: unknown) => Promise<unknown>][] = [
    ["/v1/messages/count_tokens", (b) => deps.messages.countTokens(b)],
    ["/tokenize", (b) => deps.tokenizer.tokenize(b)],
    ["/detokenize", (b) => deps.tokenizer.detokenize(b)],
  ];
  for (const [path, handler] of promptRoutes)
    v1.post(path, jsonBody(deps.maxBodyBytes), promptRoute(handler));

  app.use((req) => {
    throw notFound(`No route for ${req.method} ${req.path}.`, null, "route_not_found");
  });

  // The only place errors become HTTP responses.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    let api: ApiError;
    if (err instanceof ApiError) api = err;
    else if ((err as { type?: string }).type === "entity.too.large") api = payloadTooLarge(deps.maxBodyBytes);
    else if (isClientBodyError(err))
      // body-parser's own client errors (unsupported charset or encoding, undecodable body).
      api = new ApiError(err.status, "invalid_request_error", err.message, null, "invalid_body");
    else {
      deps.logger.error("unhandled error", {
        request_id: req.requestId,
        error: String((err as Error)?.stack ?? err),
      });
      api = internalError("The server hit an internal error.");
    }
    // A generation route's refusal gets its usage row like an answer does (once, before responding).
    void (req.usage?.record(api.status) ?? Promise.resolve()).then(() => {
      if (res.headersSent) {
        res.end();
        return;
      }
      if (api.retryAfterSeconds !== undefined) res.setHeader("Retry-After", String(api.retryAfterSeconds));
      if (api.allow) res.setHeader("Allow", api.allow.join(", "));
      res.status(api.status).json(dialectOf(req.path).errorBody(api));
    });
  });
  return app;
}
