/**
 * Anthropic's error body, `{"type": "error", "error": {"type": ..., "message": ...}}`, for the
 * catalogue's errors (src/errors.ts) on the Messages routes: the status picks Anthropic's type.
 */
import type { ApiError } from "../../errors.ts";

export type AnthropicErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "not_found_error"
  | "request_too_large"
  | "rate_limit_error"
  | "api_error"
  | "overloaded_error";

export interface AnthropicErrorBody {
  type: "error";
  error: { type: AnthropicErrorType; message: string };
}

function errorType(status: number): AnthropicErrorType {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

export function anthropicErrorBody(err: ApiError): AnthropicErrorBody {
  return { type: "error", error: { type: errorType(err.status), message: err.message } };
}
