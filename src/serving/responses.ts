/**
 * The OpenAI Responses route: its request translated into the chat request (src/protocol/
 * responses/), then the chat route's prompt, engine request, accumulator and streamer, with their
 * output translated back. Nothing here generates on its own. With `store` (the default) the
 * finished response is kept for its API key (src/storage/responses.ts): retrieval, deletion and
 * `previous_response_id`, which puts the stored conversation before the new input.
 */
import type { EngineRequest } from "../core/types.ts";
import type { EngineModel } from "../engine/engine.ts";
import {
  ApiError,
  type ApiErrorBody,
  internalError,
  invalidRequest,
  notFound,
  unsupportedField,
} from "../errors.ts";
import type { ResponseContext } from "../protocol/output-parts.ts";
import { ChatCompletionAccumulator } from "../protocol/response.ts";
import { type InputItemList, listInputItems, withItemIds } from "../protocol/responses/input-items.ts";
import { type InputItem, outputAsInput } from "../protocol/responses/items.ts";
import {
  inResponsesTerms,
  parseResponsesWire,
  type ResponsesRequest,
  toChatRequest,
} from "../protocol/responses/request.ts";
import {
  newId,
  type ResponseMeta,
  type ResponseObject,
  ResponsesAccumulator,
} from "../protocol/responses/response.ts";
import {
  errorEvent,
  isFinalEvent,
  type ResponsesEvent,
  ResponsesStreamer,
} from "../protocol/responses/stream.ts";
import { ChatCompletionStreamer } from "../protocol/stream.ts";
import type { ResponseStore } from "../storage/responses.ts";
import { chatEngineRequests, chatReasoning, checkStrictToolChoice } from "./chat-completions.ts";
import type { Caller, GenerationResult, ServingContext } from "./context.ts";
import { type Accumulator, GenerationService, type ServingDeps, type Streamer } from "./generation.ts";
import { truncatedMessages } from "./responses-truncation.ts";
import { templateEffort } from "./template-effort.ts";

/** A parsed request and the key whose stored responses it may read and add to. */
interface KeyedRequest extends ResponsesRequest {
  keyId: number | null;
}

const keyOf = (caller: Caller | undefined): number | null => caller?.keyId ?? null;

export class ResponsesService extends GenerationService<KeyedRequest, ResponseObject, ResponsesEvent> {
  protected readonly label = "response";
  private readonly store: ResponseStore;
  /** Finished responses to store, with their requests (until create stores them). */
  private readonly toKeep = new WeakMap<ResponseObject, KeyedRequest>();

  constructor(deps: ServingDeps, store: ResponseStore) {
    super(deps);
    this.store = store;
  }

  /**
   * Generation as every route has it, then the finished response stored (when asked) before it is
   * answered: a plain response once its row is committed, a stream's final event likewise. Errors
   * of the chat route's checks and of the engine name the Responses fields.
   */
  override async create(
    body: unknown,
    raw: string,
    ctx: ServingContext,
  ): Promise<GenerationResult<ResponseObject, ResponsesEvent>> {
    let result: GenerationResult<ResponseObject, ResponsesEvent>;
    try {
      result = await super.create(body, raw, ctx);
    } catch (err) {
      throw err instanceof ApiError ? inResponsesTerms(err) : err;
    }
    if (result.kind === "json") {
      await this.keep(result.body, ctx);
      return result;
    }
    if (result.kind === "stream") return { kind: "stream", frames: this.keptFrames(result.frames, ctx) };
    return result;
  }

  /** The stream's payloads; its final event waits for the response's row (an error event if none). */
  private async *keptFrames(
    frames: AsyncIterable<ResponsesEvent | ApiErrorBody>,
    ctx: ServingContext,
  ): AsyncGenerator<ResponsesEvent | ApiErrorBody> {
    for await (const payload of frames) {
      if ("type" in payload && isFinalEvent(payload))
        try {
          await this.keep(payload.response, ctx);
        } catch (err) {
          const api = err instanceof ApiError ? err : internalError(String(err));
          ctx.usage.status = api.status;
          yield errorEvent(api, payload.sequence_number);
          return;
        }
      yield payload;
    }
  }

  /** Stores a finished response its request asked to store; a row that cannot be written is a 500. */
  private async keep(response: ResponseObject, ctx: ServingContext): Promise<void> {
    const req = this.toKeep.get(response);
    if (!req) return;
    try {
      await this.store.save({
        id: response.id,
        keyId: req.keyId,
        input: withItemIds(req.conversation),
        response: response as unknown as Record<string, unknown>,
      });
    } catch (err) {
      this.deps.logger.error("response not stored", {
        request_id: ctx.usage.requestId,
        id: response.id,
        error: String(err),
      });
      throw internalError("The response could not be stored; send store: false to get it unstored.");
    }
  }

  protected parse(body: unknown, _raw: string, caller: Caller | undefined): KeyedRequest {
    const { wire, input } = parseResponsesWire(body);
    const keyId = keyOf(caller);
    let prior: InputItem[] = [];
    if (wire.previous_response_id !== undefined) {
      const stored = this.store.get(wire.previous_response_id, keyId);
      if (!stored)
        throw invalidRequest(
          `Previous response with id '${wire.previous_response_id}' not found.`,
          "previous_response_id",
          "previous_response_not_found",
        );
      const output = (stored.response as { output: Parameters<typeof outputAsInput>[0] }).output;
      prior = [...(stored.input as InputItem[]), ...outputAsInput(output)];
    }
    const chat = toChatRequest(wire, prior, input);
    checkStrictToolChoice(this.deps, chat);
    return {
      id: newId("resp"),
      wire,
      model: wire.model,
      stream: wire.stream,
      conversation: [...prior, ...input],
      chat,
      keyId,
    };
  }

  protected logFields(req: KeyedRequest): Record<string, unknown> {
    return { model: req.model, user: req.chat.user, stream: req.stream, store: req.wire.store, id: req.id };
  }

  protected async engineRequests(
    req: KeyedRequest,
    model: EngineModel,
    requestId: string,
  ): Promise<EngineRequest[]> {
    const effort = req.wire.reasoning?.effort;
    if (effort !== undefined) req.chat.reasoning_effort = templateEffort(effort, model, "reasoning.effort");
    if (req.wire.truncation === "auto") {
      const kept = await truncatedMessages(
        this.deps,
        model,
        req.chat,
        req.wire.instructions,
        req.conversation,
        this.tokenLimits(),
      );
      if (kept) req.chat.messages = kept;
    }
    return chatEngineRequests(this.deps, req.chat, model, requestId);
  }

  protected override reasoning(model: EngineModel, requests: EngineRequest[]): ResponseContext["reasoning"] {
    return chatReasoning(model, requests[0]!);
  }

  protected accumulator(req: KeyedRequest, ctx: ResponseContext): Accumulator<ResponseObject> {
    const acc = new ResponsesAccumulator(new ChatCompletionAccumulator(req.chat, ctx), req, meta(req, ctx));
    return {
      push: (e) => acc.push(e),
      result: () => this.toStore(req, acc.result()),
    };
  }

  protected streamer(req: KeyedRequest, ctx: ResponseContext): Streamer<ResponsesEvent> {
    const streamer = new ResponsesStreamer(new ChatCompletionStreamer(req.chat, ctx), req, meta(req, ctx));
    return {
      push: (e, prompt) => {
        const frames = streamer.push(e, prompt);
        for (const f of frames)
          if (f.type === "chunk" && isFinalEvent(f.data)) this.toStore(req, f.data.response);
        return frames;
      },
      fail: (error) => streamer.fail(error),
    };
  }

  /** Marks a finished response for `keep` when its request asked to store it (the default). */
  private toStore(req: KeyedRequest, response: ResponseObject): ResponseObject {
    if (req.wire.store) this.toKeep.set(response, req);
    return response;
  }

  /**
   * `GET /v1/responses/{id}/input_items`: the conversation a stored response of the caller's key
   * answered, as OpenAI's item list. (A row stored without item ids gets new ones at each read.)
   */
  inputItems(id: string, caller: Caller | undefined, query: Record<string, unknown>): InputItemList {
    const stored = this.store.get(id, keyOf(caller));
    if (!stored) throw responseNotFound(id);
    return listInputItems(withItemIds(stored.input as InputItem[]), query);
  }

  /** `GET /v1/responses/{id}`: a stored response of the caller's key. */
  retrieve(id: string, caller: Caller | undefined, query: Record<string, unknown>): ResponseObject {
    const asked = Object.keys(query)[0];
    if (asked !== undefined)
      throw unsupportedField(
        asked,
        "a stored response is returned whole, as JSON; query parameters are not served",
      );
    const stored = this.store.get(id, keyOf(caller));
    if (!stored) throw responseNotFound(id);
    return stored.response as unknown as ResponseObject;
  }

  /** `DELETE /v1/responses/{id}`. */
  async remove(
    id: string,
    caller: Caller | undefined,
  ): Promise<{ id: string; object: "response"; deleted: true }> {
    if (!(await this.store.delete(id, keyOf(caller)))) throw responseNotFound(id);
    return { id, object: "response", deleted: true };
  }
}

function responseNotFound(id: string) {
  return notFound(`Response with id '${id}' not found.`, "response_id", "response_not_found");
}

function meta(req: KeyedRequest, ctx: ResponseContext): ResponseMeta {
  return { id: req.id, model: ctx.model, createdAt: ctx.created ?? Math.floor(Date.now() / 1000) };
}
