/**
 * The Messages stream, translated from the chat stream of the same engine events: message_start
 * (and a ping), then per content block content_block_start, its deltas (thinking_delta for a
 * reasoning model's think block, text_delta, or input_json_delta for a tool call's arguments) and content_block_stop, then message_delta with
 * the stop reason and the output tokens, and message_stop. Each event is sent as
 * `event: <type>` with its JSON as data (src/http/stream-dialect.ts).
 */
import type { EngineEvent } from "../../core/types.ts";
import type { ApiError, ApiErrorBody } from "../../errors.ts";
import type { ChatCompletionChunk, ChatCompletionStreamer } from "../stream.ts";
import { inMessagesTerms } from "./messages-request.ts";
import {
  type AnthropicMessage,
  type ContentBlock,
  type MessagesUsage,
  messageId,
  messagesUsage,
  type StopReason,
  stopReason,
  toolUseId,
} from "./messages-response.ts";

export type MessagesEvent =
  | { type: "message_start"; message: Omit<AnthropicMessage, "stop_reason"> & { stop_reason: null } }
  | { type: "ping" }
  | { type: "content_block_start"; index: number; content_block: ContentBlock }
  | {
      type: "content_block_delta";
      index: number;
      delta:
        | { type: "text_delta"; text: string }
        | { type: "thinking_delta"; thinking: string }
        | { type: "input_json_delta"; partial_json: string };
    }
  | { type: "content_block_stop"; index: number }
  | {
      type: "message_delta";
      delta: { stop_reason: StopReason; stop_sequence: string | null };
      usage: Pick<MessagesUsage, "output_tokens">;
    }
  | { type: "message_stop" };

type Frame = { type: "chunk"; data: MessagesEvent } | { type: "error"; error: ApiError; data: ApiErrorBody };

/** An error once the stream began, naming the Messages fields as a refusal before it would. */
function errorFrame(error: ApiError): Frame {
  const named = inMessagesTerms(error);
  return { type: "error", error: named, data: named.toBody() };
}

export class MessagesStreamer {
  private readonly chat: ChatCompletionStreamer;
  private readonly id: string;
  private readonly model: string;
  private started = false;
  /** The open content block: its index and kind. */
  private block: { index: number; kind: "thinking" | "text" | "tool_use" } | undefined;
  private blocks = 0;
  private stop: { stop_reason: StopReason; stop_sequence: string | null } = {
    stop_reason: "end_turn",
    stop_sequence: null,
  };

  constructor(chat: ChatCompletionStreamer, ctx: { requestId: string; model: string }) {
    this.chat = chat;
    this.id = messageId(ctx.requestId);
    this.model = ctx.model;
  }

  push(event: EngineEvent, _prompt: number): Frame[] {
    const out: Frame[] = [];
    const promptTokens = event.type === "prompt" ? event.promptTokenIds.length : undefined;
    const cached = event.type === "prompt" ? event.cachedTokens : undefined;
    for (const frame of this.chat.push(event)) {
      if (frame.type === "error") out.push(errorFrame(frame.error));
      else this.translate(frame.data, out, promptTokens ?? 0, cached ?? 0);
    }
    return out;
  }

  fail(error: ApiError): Frame {
    this.chat.fail(error);
    return errorFrame(error);
  }

  private translate(chunk: ChatCompletionChunk, out: Frame[], promptTokens: number, cached: number): void {
    const send = (data: MessagesEvent) => out.push({ type: "chunk", data });
    if (!this.started) {
      this.started = true;
      send({
        type: "message_start",
        message: {
          id: this.id,
          type: "message",
          role: "assistant",
          model: this.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: messagesUsage(promptTokens, 0, cached),
        },
      });
      send({ type: "ping" });
    }
    for (const choice of chunk.choices) {
      const { content, reasoning, tool_calls } = choice.delta;
      if (reasoning) {
        this.open("thinking", send, { type: "thinking", thinking: "", signature: "" });
        send({
          type: "content_block_delta",
          index: this.block!.index,
          delta: { type: "thinking_delta", thinking: reasoning },
        });
      }
      if (content) {
        this.open("text", send, { type: "text", text: "" });
        send({
          type: "content_block_delta",
          index: this.block!.index,
          delta: { type: "text_delta", text: content },
        });
      }
      for (const call of tool_calls ?? []) {
        if (call.id !== undefined) {
          this.close(send);
          this.open("tool_use", send, {
            type: "tool_use",
            id: toolUseId(call.id),
            name: call.function.name ?? "",
            input: {},
          });
        }
        if (call.function.arguments)
          send({
            type: "content_block_delta",
            index: this.block!.index,
            delta: { type: "input_json_delta", partial_json: call.function.arguments },
          });
      }
      if (choice.finish_reason !== null) {
        this.close(send);
        this.stop = stopReason(choice.finish_reason, choice.stop_reason);
      }
    }
    if (chunk.usage && chunk.choices.length === 0) {
      this.close(send);
      send({
        type: "message_delta",
        delta: this.stop,
        usage: { output_tokens: chunk.usage.completion_tokens },
      });
      send({ type: "message_stop" });
    }
  }

  /** Opens a block of `kind` unless one is open already (text and thinking continue their open block). */
  private open(
    kind: "thinking" | "text" | "tool_use",
    send: (e: MessagesEvent) => void,
    block: ContentBlock,
  ): void {
    if (this.block?.kind === kind && kind !== "tool_use") return;
    this.close(send);
    this.block = { index: this.blocks++, kind };
    send({ type: "content_block_start", index: this.block.index, content_block: block });
  }

  private close(send: (e: MessagesEvent) => void): void {
    if (!this.block) return;
    send({ type: "content_block_stop", index: this.block.index });
    this.block = undefined;
  }
}
