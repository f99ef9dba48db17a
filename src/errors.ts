/**
 * The one error catalogue of the service. Every failure a client can see is an ApiError with an
 * HTTP status, an OpenAI error `type`, the offending parameter (when one is to blame) and a stable
 * `code`. Only src/http/ turns these into responses (JSON body or SSE error event).
 */
import { RequestError } from "./core/request-error.ts";
import type { EngineErrorCode } from "./core/types.ts";

export type ApiErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "not_found_error"
  | "server_error"
  | "service_unavailable_error"
  // OpenAI's rate-limit error types: the limit hit was on requests or on tokens.
  | "requests"
  | "tokens";

export interface ApiErrorBody {
  error: { message: string; type: ApiErrorType; param: string | null; code: string | null };
}

export class ApiError extends Error {
  readonly status: number;
  readonly type: ApiErrorType;
  readonly param: string | null;
  readonly code: string | null;
  /** Seconds after which a retry may succeed (the Retry-After header of a 429 or 503). */
  retryAfterSeconds?: number;
  /** The methods the path answers (the Allow header of a 405). */
  allow?: string[];

  constructor(
    status: number,
    type: ApiErrorType,
    message: string,
    param: string | null = null,
    code: string | null = null,
  ) {
    super(message);
    this.status = status;
    this.type = type;
    this.param = param;
    this.code = code;
  }

  toBody(): ApiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/**
 * `err` with its message and param in another API's names for the same fields (`rename` maps
 * chat's paths to them, e.g. Responses' `text.format`); status, type, code and Retry-After kept.
 */
export function withFieldNames(err: ApiError, rename: (text: string) => string): ApiError {
  const out = new ApiError(
    err.status,
    err.type,
    rename(err.message),
    err.param && rename(err.param),
    err.code,
  );
  if (err.retryAfterSeconds !== undefined) out.retryAfterSeconds = err.retryAfterSeconds;
  return out;
}

/** 400: a field's value or a combination of fields cannot be served. */
export function invalidRequest(
  message: string,
  param: string | null = null,
  code = "invalid_value",
): ApiError {
  return new ApiError(400, "invalid_request_error", message, param, code);
}

/** 400: a field this server does not know (OpenAI rejects unknown fields). */
export function unknownField(param: string): ApiError {
  return new ApiError(
    400,
    "invalid_request_error",
    `Unrecognized request argument supplied: ${param}`,
    param,
    "unknown_parameter",
  );
}

/** 400: a known field whose feature this engine or model does not have; never silently ignored. */
export function unsupportedField(param: string, why: string): ApiError {
  return new ApiError(
    400,
    "invalid_request_error",
    `${param} is not supported: ${why}`,
    param,
    "unsupported_parameter",
  );
}

export function unauthorized(
  message = "Missing or invalid API key. Send `Authorization: Bearer <key>`.",
): ApiError {
  return new ApiError(401, "authentication_error", message, null, "invalid_api_key");
}

export function notFound(message: string, param: string | null = null, code = "not_found"): ApiError {
  return new ApiError(404, "not_found_error", message, param, code);
}

/** 405 with Allow: the path exists, but not for this method. */
export function methodNotAllowed(method: string, path: string, allow: string[]): ApiError {
  const err = new ApiError(
    405,
    "invalid_request_error",
    `${method} is not allowed on ${path}; it answers ${allow.join(", ")}.`,
    null,
    "method_not_allowed",
  );
  err.allow = allow;
  return err;
}

export function modelNotFound(model: string): ApiError {
  return notFound(`The model \`${model}\` does not exist.`, "model", "model_not_found");
}

export function payloadTooLarge(limitBytes: number): ApiError {
  return new ApiError(
    413,
    "invalid_request_error",
    `Request body exceeds ${limitBytes} bytes.`,
    null,
    "payload_too_large",
  );
}

export function internalError(message: string): ApiError {
  return new ApiError(500, "server_error", message, null, "internal_error");
}

export function unavailable(message: string): ApiError {
  return new ApiError(503, "service_unavailable_error", message, null, "unavailable");
}

/** 503 with Retry-After: the server is at capacity right now. */
export function overloaded(message: string, retryAfterSeconds: number): ApiError {
  const err = new ApiError(503, "service_unavailable_error", message, null, "server_overloaded");
  err.retryAfterSeconds = retryAfterSeconds;
  return err;
}

/** 429 with Retry-After and OpenAI's rate-limit body: an API key's request or token limit. */
export function rateLimited(
  limit: "requests" | "tokens",
  message: string,
  retryAfterSeconds: number,
): ApiError {
  const err = new ApiError(429, limit, message, null, "rate_limit_exceeded");
  err.retryAfterSeconds = retryAfterSeconds;
  return err;
}

/** 408: the request ran past the server's request timeout. */
export function requestTimeout(seconds: number): ApiError {
  return new ApiError(
    408,
    "invalid_request_error",
    `The request did not finish within the server's request timeout of ${seconds} s.`,
    null,
    "request_timeout",
  );
}

/** An engine error event (or a RequestError's code) → the catalogue's error. */
export function engineErrorToApiError(e: {
  code: EngineErrorCode;
  message: string;
  param?: string;
}): ApiError {
  switch (e.code) {
    case "invalid_request":
      return invalidRequest(e.message, e.param ?? null);
    case "priority_not_supported":
      return invalidRequest(e.message, "priority", "priority_not_supported");
    case "unavailable":
      return unavailable(e.message);
    case "engine_failure":
      return internalError(e.message);
  }
}

/** Runs `fn`; a RequestError it throws (the engine refusing a request as asked) becomes its ApiError. */
export function asApiErrors<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof RequestError) throw engineErrorToApiError(err);
    throw err;
  }
}
