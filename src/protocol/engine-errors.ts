/** Engine error events → the service's error catalogue. */

import type { EngineErrorCode } from "../core/types.ts";
import { type ApiError, internalError, invalidRequest, unavailable } from "../errors.ts";

export interface EngineErrorLike {
  code: EngineErrorCode;
  message: string;
  param?: string;
}

export function engineErrorToApiError(e: EngineErrorLike): ApiError {
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
