/**
 * How a route frames its event stream: OpenAI's chat and completions (`data: <json>` per chunk,
 * errors as `data: {"error": ...}`, `data: [DONE]` at the end), OpenAI's Responses (`event: <type>`
 * then `data: <json>`, errors as an `error` event, no end marker) or Anthropic's (named events too,
 * errors as an `error` event in Anthropic's body, no end marker).
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

/** The last sequence_number sent on each Responses stream, so a late error event follows it. */
const lastSequence = new WeakMap<SseWriter, number>();

export const responsesDialect: StreamDialect = {
  send(sse, payload) {
    // The streamer turns failures into error events itself; an error body here is the catalogue's.
    if (isErrorBody(payload)) {
      const e = payload.error;
      this.error(sse, new ApiErrorClass(statusOf(e.type), e.type, e.message, e.param, e.code));
      return;
    }
    const event = payload as { type: string; sequence_number?: number };
    if (event.sequence_number !== undefined) lastSequence.set(sse, event.sequence_number);
    sse.event(event.type, payload);
  },
  error: (sse, err) =>
    sse.event("error", {
      type: "error",
      code: err.code,
      message: err.message,
      param: err.param,
      sequence_number: (lastSequence.get(sse) ?? -1) + 1,
    }),
  done: (sse) => sse.end(),
  errorBody: (err) => err.toBody(),
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
