/**
 * What a serving call receives besides the body, and what it gives back: typed data only, no
 * HTTP objects, so any front end (the HTTP API, a test, a CLI) can drive a service.
 */
import type { ApiErrorBody } from "../errors.ts";

/** Who is calling: the API key and the project header's team and project. */
export interface Caller {
  keyId: number | null;
  team: string | null;
  project: string | null;
}

/**
 * What a request's usage row needs from the service, filled in as the request runs. The front
 * end creates it, the service updates it, the front end's usage recorder reads it.
 */
export interface UsageTally {
  /** The request's id: the front end's, or the body's `request_id` when the client gave no other. */
  requestId: string;
  /** The model as requested, then the resolved model id; "" while unknown. */
  model: string;
  /** "step<N>" when a checkpoint served the request. */
  checkpoint: string | null;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  /**
   * The status of an outcome the service returned (200, 499, or an error that came after the
   * stream began); unset while running and when the service threw (the error has the status).
   */
  status?: number;
}

export function newUsageTally(requestId: string): UsageTally {
  return { requestId, model: "", checkpoint: null, promptTokens: 0, completionTokens: 0, cachedTokens: 0 };
}

export interface ServingContext {
  /** The client chose `usage.requestId` (a header): the body's request_id does not replace it. */
  requestIdFromClient: boolean;
  caller?: Caller;
  /** Aborts when the client goes away; its generation stops at once. */
  signal: AbortSignal;
  usage: UsageTally;
}

/**
 * A generation's outcome: a complete response, an event stream whose first chunk already exists
 * (a failure before it is thrown, so it keeps its status), or nothing because the client left.
 * Stream payloads are chunks, and after a failure one error body; the front end ends the stream.
 */
export type GenerationResult<J, C> =
  | { kind: "json"; body: J }
  | { kind: "stream"; frames: AsyncIterable<C | ApiErrorBody> }
  | { kind: "closed" };

/** Status recorded for a client that went away before the response completed (nginx's convention). */
export const CLIENT_CLOSED = 499;

/** A generation route's service as a front end sees it (GenerationService implements it). */
export interface GenerationEndpoint<J = unknown, C = unknown> {
  create(body: unknown, raw: string, ctx: ServingContext): Promise<GenerationResult<J, C>>;
}
