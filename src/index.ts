/**
 * The package's programmatic API: the in-process engine (src/engine/engine.ts) with its request
 * and result types, the error every failure is, and the HTTP server the CLI starts.
 */
export type {
  EngineEvent,
  EngineRequest,
  FinishReason,
  PromptTokenLogprob,
  TokenLogprob,
} from "./core/types.ts";
export {
  ENGINE_DEFAULTS,
  Engine,
  type EngineModel,
  type EngineOptions,
  type GeneratedChoice,
  type GenerateParams,
  type GenerateRequest,
  type GenerateResult,
  type PreparedRequest,
  type PromptInput,
  type RunOptions,
  type ScoreRequest,
  type ScoreResult,
} from "./engine/engine.ts";
export { ApiError, type ApiErrorBody, type ApiErrorType } from "./errors.ts";
export { type RunningServer, SERVER_DEFAULTS, type ServerConfig, startServer } from "./server.ts";
