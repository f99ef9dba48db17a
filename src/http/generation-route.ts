/**
 * The HTTP side of a generation route: JSON body in; a JSON response, an SSE stream, or nothing
 * when the client already left. The usage row is written just before the response's last byte.
 */
import type { Request, Response } from "express";
import type { GenerationEndpoint, GenerationResult, ServingContext } from "../serving/context.ts";
import type { JsonBody } from "./json-body.ts";
import { SseWriter } from "./sse.ts";
import { openaiDialect, type StreamDialect } from "./stream-dialect.ts";
import { usageUnavailable } from "./usage.ts";

/** Aborts when the client goes away before its response completed. */
function clientGone(res: Response): AbortSignal {
  const abort = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) abort.abort();
  });
  return abort.signal;
}

/** Characters a header value may carry as they are (visible ASCII and space). */
const HEADER_SAFE = /^[\x20-\x7e]*$/;
/** Unpaired UTF-16 surrogates, which percent-encoding cannot represent. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/gu;

/**
 * The service may take the body's request_id as the request's id: logs and the header follow. An
 * id a header cannot carry as it is (non-ASCII, control characters) is sent percent-encoded
 * (a lone surrogate as U+FFFD).
 */
function adoptRequestId(req: Request, res: Response, id: string): void {
  if (id === req.requestId) return;
  req.requestId = id;
  if (!res.headersSent)
    res.setHeader(
      "X-Request-Id",
      HEADER_SAFE.test(id) ? id : encodeURIComponent(id.replace(LONE_SURROGATE, "\uFFFD")),
    );
}

/** Needs `jsonBody` and a usage row (UsageRecorder.onRoute) before it. */
export function generationRoute(service: GenerationEndpoint, dialect: StreamDialect = openaiDialect) {
  return async (req: Request, res: Response): Promise<void> => {
    const { raw, value } = req.body as JsonBody;
    const usage = req.usage!;
    const ctx: ServingContext = {
      requestIdFromClient: Boolean(req.get("x-request-id")),
      caller: req.caller,
      signal: clientGone(res),
      usage: usage.start(),
    };
    let result: GenerationResult<unknown, unknown>;
    try {
      result = await service.create(value, raw, ctx);
    } finally {
      adoptRequestId(req, res, ctx.usage.requestId);
    }
    // The service set the outcome's status by the time its result (or its stream) is complete.
    // A row that cannot be written fails the response closed: nothing is served unrecorded.
    const answered = () => usage.record(ctx.usage.status!);
    if (result.kind === "json") {
      if (!(await answered())) throw usageUnavailable();
      res.json(result.body);
    } else if (result.kind === "closed") await answered();
    else {
      const sse = new SseWriter(res);
      for await (const payload of result.frames) dialect.send(sse, payload);
      if (!(await answered())) {
        dialect.error(sse, usageUnavailable());
        res.end();
      } else if (!ctx.signal.aborted) dialect.done(sse);
    }
  };
}
