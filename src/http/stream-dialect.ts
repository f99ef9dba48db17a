/**
 * How a route frames its event stream: OpenAI's (`data: <json>` per chunk, errors as
 * `data: {"error": ...}`, `data: [DONE]` at the end) or Anthropic's (`event: <type>` then
 * `data: <json>`, errors as an `error` event in Anthropic's body, no end marker).
 */
import type { ApiError, ApiErrorBody } from "../errors.ts";
import { ApiError as ApiErrorClass } from "../errors.ts";
import { anthropicErrorBody } from "../protocol/anthropic/errors.ts";
import type { SseWriter } from "./sse.ts";

export interface StreamDialect {
  /** One payload of the service's stream: a chunk, or after a failure the catalogue's error body. */
  send(sse: SseWriter, payload: unknown): void;
  error(sse: SseWriter, err: ApiError): void;
  /** The stream completed. */
  done(sse: SseWriter): void;
  /** The error body of a refused request, before any stream. */
  errorBody(err: ApiError): unknown;
}

export const openaiDialect: StreamDialect = {
  send: (sse, payload) => sse.send(payload),
  error: (sse, err) => sse.error(err),
  done: (sse) => sse.done(),
  errorBody: (err) => err.toBody(),
};

function isErrorBody(payload: unknown): payload is ApiErrorBody {
  return typeof payload === "object" && payload !== null && "error" in payload && !("type" in payload);
}

export const anthropicDialect: StreamDialect = {
  send(sse, payload) {
    if (isErrorBody(payload)) {
      const e = payload.error;
      this.error(sse, new ApiErrorClass(statusOf(e.type), e.type, e.message, e.param, e.code));
    } else sse.event((payload as { type: string }).type, payload);
  },
  error: (sse, err) => sse.event("error", anthropicErrorBody(err)),
  done: (sse) => sse.end(),
  errorBody: anthropicErrorBody,
};

/** The status an error body's type stands for (the stream has sent its status already). */
function statusOf(type: ApiErrorBody["error"]["type"]): number {
  switch (type) {
    case "invalid_request_error":
      return 400;
    case "authentication_error":
      return 401;
    case "permission_error":
      return 403;
    case "not_found_error":
      return 404;
    case "requests":
    case "tokens":
      return 429;
    case "service_unavailable_error":
      return 503;
    default:
      return 500;
  }
}
