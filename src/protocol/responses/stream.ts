/**
 * The Responses stream, translated from the chat stream of the same engine events:
 * response.created and response.in_progress, then per output item response.output_item.added, its
 * content (a message: content_part.added, output_text.delta…, output_text.done, content_part.done;
 * a function call: function_call_arguments.delta…, function_call_arguments.done) and
 * response.output_item.done, then response.completed (or response.incomplete) with the whole
 * response. Every event carries its sequence_number; a failure after the first event is an
 * `error` event. Each is sent as `event: <type>` with its JSON as data (src/http/stream-dialect.ts).
 */
import type { EngineEvent } from "../../core/types.ts";
import type { ApiError, ApiErrorBody } from "../../errors.ts";
import type { LogprobEntry } from "../output-parts.ts";
import type { ChatCompletionChunk, ChatCompletionStreamer } from "../stream.ts";
import { inResponsesTerms, type ResponsesRequest } from "./request.ts";
import {
  type ItemStatus,
  newId,
  type OutputFunctionCall,
  type OutputItem,
  type OutputMessage,
  type OutputReasoning,
  type OutputTextPart,
  outputMessage,
  type ResponseMeta,
  type ResponseObject,
  type ResponseStatus,
  reasoningItem,
  responseObject,
  responseStatus,
  responsesUsage,
} from "./response.ts";

type Numbered<E> = E & { sequence_number: number };
type At = { output_index: number };
type InPart = At & { item_id: string; content_index: number };

/** One event type per member, so a type narrows to its fields. */
type Lifecycle<T extends string> = { type: T; response: ResponseObject };
type ItemEvent<T extends string> = { type: T; item: OutputItem } & At;
type ReasoningTextPart = { type: "reasoning_text"; text: string };
type PartEvent<T extends string> = { type: T; part: OutputTextPart | ReasoningTextPart } & InPart;

export type ResponsesEventBody =
  | Lifecycle<"response.created">
  | Lifecycle<"response.in_progress">
  | Lifecycle<"response.completed">
  | Lifecycle<"response.incomplete">
  | ItemEvent<"response.output_item.added">
  | ItemEvent<"response.output_item.done">
  | PartEvent<"response.content_part.added">
  | PartEvent<"response.content_part.done">
  | ({ type: "response.output_text.delta"; delta: string; logprobs: LogprobEntry[] } & InPart)
  | ({ type: "response.output_text.done"; text: string; logprobs: LogprobEntry[] } & InPart)
  | ({ type: "response.reasoning_text.delta"; delta: string } & InPart)
  | ({ type: "response.reasoning_text.done"; text: string } & InPart)
  | ({ type: "response.function_call_arguments.delta"; delta: string; item_id: string } & At)
  | ({ type: "response.function_call_arguments.done"; arguments: string; item_id: string } & At)
  | { type: "error"; code: string | null; message: string; param: string | null };

export type ResponsesEvent = Numbered<ResponsesEventBody>;

type Frame = { type: "chunk"; data: ResponsesEvent } | { type: "error"; error: ApiError; data: ApiErrorBody };

/** The item being written: a message with its text and logprobs so far, or a function call. */
type OpenMessage = { index: number; message: OutputMessage; text: string; logprobs: LogprobEntry[] };
type OpenReasoning = { index: number; reasoning: OutputReasoning; text: string };
type OpenItem = OpenMessage | OpenReasoning | { index: number; call: OutputFunctionCall };

/** The terminal events, whose response is the finished one. */
export function isFinalEvent(
  e: ResponsesEvent,
): e is Numbered<Lifecycle<"response.completed"> | Lifecycle<"response.incomplete">> {
  return e.type === "response.completed" || e.type === "response.incomplete";
}

/** The `error` event of a failure after the stream began (the catalogue's error, in Responses terms). */
export function errorEvent(chatError: ApiError, sequence: number): ResponsesEvent {
  const error = inResponsesTerms(chatError);
  return {
    type: "error",
    code: error.code,
    message: error.message,
    param: error.param,
    sequence_number: sequence,
  };
}

export class ResponsesStreamer {
  private readonly chat: ChatCompletionStreamer;
  private readonly req: ResponsesRequest;
  private readonly meta: ResponseMeta;
  private sequence = 0;
  private started = false;
  private open: OpenItem | undefined;
  private readonly output: OutputItem[] = [];
  private status: Exclude<ResponseStatus, "in_progress"> = "completed";
  /** The output ended inside the think block (a length finish): its reasoning item is incomplete. */
  private endedThinking = false;
  /** Logprobs of tokens that wrote no text yet (held back by the detokenizer): the next text's. */
  private pendingLogprobs: LogprobEntry[] = [];

  constructor(chat: ChatCompletionStreamer, req: ResponsesRequest, meta: ResponseMeta) {
    this.chat = chat;
    this.req = req;
    this.meta = meta;
  }

  push(event: EngineEvent, _prompt: number): Frame[] {
    const out: Frame[] = [];
    for (const frame of this.chat.push(event)) {
      if (frame.type === "chunk") this.translate(frame.data, out);
      // Before any event a failure is still a plain error response with its status.
      else if (!this.started) {
        const error = inResponsesTerms(frame.error);
        out.push({ type: "error", error, data: error.toBody() });
      } else out.push(this.fail(frame.error));
    }
    return out;
  }

  fail(chatError: ApiError): Frame {
    this.chat.fail(chatError);
    return { type: "chunk", data: errorEvent(chatError, this.sequence++) };
  }

  private number(body: ResponsesEventBody): ResponsesEvent {
    return { ...body, sequence_number: this.sequence++ } as ResponsesEvent;
  }

  private translate(chunk: ChatCompletionChunk, out: Frame[]): void {
    const send = (body: ResponsesEventBody) => out.push({ type: "chunk", data: this.number(body) });
    if (!this.started) {
      this.started = true;
      const response = responseObject(this.req, this.meta, "in_progress", [], null);
      send({ type: "response.created", response });
      send({ type: "response.in_progress", response });
    }
    for (const choice of chunk.choices) {
      const { content, reasoning, tool_calls } = choice.delta;
      this.pendingLogprobs.push(...(choice.logprobs?.content ?? []));
      if (reasoning) this.reasoningText(reasoning, send);
      if (content) this.text(content, send);
      for (const call of tool_calls ?? []) {
        if (call.id !== undefined) this.startCall(call.id, call.function.name ?? "", send);
        if (call.function.arguments && this.open && "call" in this.open) {
          this.open.call.arguments += call.function.arguments;
          send({
            type: "response.function_call_arguments.delta",
            item_id: this.open.call.id,
            output_index: this.open.index,
            delta: call.function.arguments,
          });
        }
      }
      if (choice.finish_reason !== null) {
        this.status = responseStatus(choice.finish_reason);
        // An empty answer is still a message, as the non-streamed response has it (unless the
        // output ended inside the think block: then there is only the reasoning).
        const thinking = this.open !== undefined && "reasoning" in this.open;
        if (this.output.length === 0 && !this.open) this.openMessage(send);
        if (thinking && this.status === "incomplete") this.endedThinking = true;
        this.close(send);
      }
    }
    if (chunk.usage && chunk.choices.length === 0) {
      const response = responseObject(
        this.req,
        this.meta,
        this.status,
        this.output,
        responsesUsage(chunk.usage),
      );
      send({ type: this.status === "completed" ? "response.completed" : "response.incomplete", response });
    }
  }

  private reasoningText(delta: string, send: (e: ResponsesEventBody) => void): void {
    if (!this.open || !("reasoning" in this.open)) {
      this.close(send);
      const reasoning: OutputReasoning = { ...reasoningItem(newId("rs"), "", "in_progress"), content: [] };
      const index = this.output.length;
      this.open = { index, reasoning, text: "" };
      send({ type: "response.output_item.added", output_index: index, item: reasoning });
      send({
        type: "response.content_part.added",
        item_id: reasoning.id,
        output_index: index,
        content_index: 0,
        part: { type: "reasoning_text", text: "" },
      });
    }
    const open = this.open as OpenReasoning;
    open.text += delta;
    send({
      type: "response.reasoning_text.delta",
      item_id: open.reasoning.id,
      output_index: open.index,
      content_index: 0,
      delta,
    });
  }

  private text(delta: string, send: (e: ResponsesEventBody) => void): void {
    if (!this.open || !("message" in this.open)) {
      this.close(send);
      this.openMessage(send);
    }
    const open = this.open as OpenMessage;
    const logprobs = this.pendingLogprobs;
    this.pendingLogprobs = [];
    open.text += delta;
    open.logprobs.push(...logprobs);
    send({
      type: "response.output_text.delta",
      item_id: open.message.id,
      output_index: open.index,
      content_index: 0,
      delta,
      logprobs,
    });
  }

  private openMessage(send: (e: ResponsesEventBody) => void): void {
    const message: OutputMessage = { ...outputMessage(newId("msg"), "", "in_progress"), content: [] };
    const index = this.output.length;
    this.open = { index, message, text: "", logprobs: [] };
    send({ type: "response.output_item.added", output_index: index, item: message });
    send({
      type: "response.content_part.added",
      item_id: message.id,
      output_index: index,
      content_index: 0,
      part: { type: "output_text", text: "", annotations: [], logprobs: [] },
    });
  }

  private startCall(callId: string, name: string, send: (e: ResponsesEventBody) => void): void {
    this.close(send);
    const call: OutputFunctionCall = {
      id: newId("fc"),
      type: "function_call",
      status: "in_progress",
      call_id: callId,
      name,
      arguments: "",
    };
    this.open = { index: this.output.length, call };
    send({ type: "response.output_item.added", output_index: this.open.index, item: { ...call } });
  }

  /** Finishes the open item: its done events, and the item joins the output. */
  private close(send: (e: ResponsesEventBody) => void): void {
    const open = this.open;
    if (!open) return;
    this.open = undefined;
    const index = open.index;
    if ("reasoning" in open) {
      const item = reasoningItem(
        open.reasoning.id,
        open.text,
        this.endedThinking ? "incomplete" : "completed",
      );
      const at = { item_id: item.id, output_index: index, content_index: 0 };
      send({ type: "response.reasoning_text.done", ...at, text: open.text });
      send({ type: "response.content_part.done", ...at, part: item.content[0]! });
      this.output.push(item);
      send({ type: "response.output_item.done", output_index: index, item });
      return;
    }
    if ("call" in open) {
      const item: OutputFunctionCall = { ...open.call, status: "completed" };
      send({
        type: "response.function_call_arguments.done",
        item_id: item.id,
        output_index: index,
        arguments: item.arguments,
      });
      this.output.push(item);
      send({ type: "response.output_item.done", output_index: index, item });
      return;
    }
    const status: ItemStatus = this.status === "incomplete" ? "incomplete" : "completed";
    // Tokens that never wrote text still count among the item's logprobs.
    const logprobs = [...open.logprobs, ...this.pendingLogprobs];
    this.pendingLogprobs = [];
    const item = outputMessage(open.message.id, open.text, status, logprobs);
    const at = { item_id: item.id, output_index: index, content_index: 0 };
    send({ type: "response.output_text.done", ...at, text: open.text, logprobs });
    send({ type: "response.content_part.done", ...at, part: item.content[0]! });
    this.output.push(item);
    send({ type: "response.output_item.done", output_index: index, item });
  }
}
