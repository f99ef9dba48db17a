/**
 * The streaming response: engine events in, vLLM's chat.completion.chunk objects out, one choice
 * per chunk, choices interleaved in arrival order. Pure — the caller writes each frame as
 * `data: <json>` and ends the stream with `data: [DONE]` once `finished` is true.
 *
 * Order per request: a role chunk per choice (prompt_token_ids on the very first), an echo chunk
 * per choice, content chunks, a finish chunk per choice, then a usage chunk when
 * stream_options.include_usage is set.
 */

import type { EngineEvent, FinishReason } from "../core/types.ts";
import { ChoiceTracker } from "../engine/choice-tracker.ts";
import type { ApiError, ApiErrorBody } from "../errors.ts";
import { engineErrorToApiError } from "../errors.ts";
import type { ChatCompletionRequest } from "./chat-request.ts";
import {
  type ChoiceLogprobs,
  completionId,
  echoText,
  logprobEntries,
  type ResponseContext,
  responseRole,
  type Usage,
  unixSeconds,
  usage,
} from "./output-parts.ts";
import { type ReasoningPart, ThinkStreamParser } from "./reasoning/think-parser.ts";
import { type ToolCallDelta, toolCallDeltas, toolCallHeader, toolCallParser } from "./tool-calls/parsers.ts";
import type { ToolCallOutput, ToolCallStreamParser } from "./tool-calls/types.ts";

export interface ChatCompletionChunkChoice {
  index: number;
  delta: ChunkDelta;
  logprobs: ChoiceLogprobs | null;
  finish_reason: FinishReason | "tool_calls" | null;
  stop_reason?: number | string | null;
  token_ids?: number[] | null;
}

type ChunkDelta = {
  role?: string;
  content?: string;
  /** A reasoning model's think block, under both names clients read (see response.ts). */
  reasoning?: string;
  reasoning_content?: string;
  tool_calls?: ToolCallDelta[];
};

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: ChatCompletionChunkChoice[];
  usage?: Usage;
  prompt_token_ids?: number[];
}

/**
 * One `data:` payload. An error frame carries its ApiError too: before anything was sent, the
 * caller may answer with a plain JSON error and its real status instead.
 */
export type StreamFrame =
  | { type: "chunk"; data: ChatCompletionChunk }
  | { type: "error"; error: ApiError; data: ApiErrorBody };

export class ChatCompletionStreamer {
  private readonly req: ChatCompletionRequest;
  private readonly id: string;
  private readonly model: string;
  private readonly created: number;
  private readonly includeUsage: boolean;
  private readonly continuousUsage: boolean;
  private readonly tracker: ChoiceTracker;
  /** Per choice, when tool calls are parsed from the output (tool_choice other than "none"). */
  private readonly toolParsers: (ToolCallStreamParser | undefined)[];
  /** Per choice, the tool calls started so far (the next call's index). */
  private readonly toolCalls: number[];
  /** Per choice, for a reasoning model: its think block apart from the answer. */
  private readonly reasoningParsers: (ThinkStreamParser | undefined)[];
  private sentAny = false;
  private started = false;
  private ended = false;

  constructor(req: ChatCompletionRequest, ctx: ResponseContext) {
    this.req = req;
    this.id = completionId(ctx.requestId);
    this.model = ctx.model;
    this.created = ctx.created ?? unixSeconds();
    this.includeUsage = req.stream_options?.include_usage ?? false;
    // vLLM sends per-chunk usage only when the final usage was asked for too.
    this.continuousUsage = this.includeUsage && (req.stream_options?.continuous_usage_stats ?? false);
    this.tracker = new ChoiceTracker(req.n, { keepOutput: false });
    this.toolParsers = Array.from({ length: req.n }, () => toolCallParser(req, ctx.toolParser, true));
    this.toolCalls = new Array<number>(req.n).fill(0);
    const thinking = ctx.reasoning;
    this.reasoningParsers = Array.from({ length: req.n }, () =>
      thinking ? new ThinkStreamParser(thinking.opened) : undefined,
    );
  }

  /** True after the last frame (usage chunk or error): the caller then writes [DONE]. */
  get finished(): boolean {
    return this.ended;
  }

  /** True once a chunk was produced. An error before that can still be a plain JSON error response. */
  get producedChunks(): boolean {
    return this.sentAny;
  }

  push(event: EngineEvent): StreamFrame[] {
    if (this.ended) return [];
    const frames: StreamFrame[] = [];
    const state = this.tracker.push(event);
    switch (event.type) {
      case "prompt":
        this.start(frames, event.promptTokenIds);
        break;
      case "delta": {
        this.start(frames, undefined);
        if (event.text === "" && event.tokenIds.length === 0) break;
        const thinking = this.reasoningParsers[event.choice];
        const parts: ReasoningPart[] = thinking
          ? thinking.push(event.text)
          : [{ kind: "content", text: event.text }];
        const deltas = this.partDeltas(event.choice, parts);
        // Text held back by the tool parser still reports its tokens' logprobs and ids.
        if (deltas.length === 0 && (this.req.logprobs || this.req.return_token_ids)) deltas.push({});
        deltas.forEach((delta, i) => {
          const first = i === 0;
          const choice: ChatCompletionChunkChoice = {
            index: event.choice,
            delta,
            logprobs: this.req.logprobs
              ? { content: first ? logprobEntries(event.logprobs ?? []) : [] }
              : null,
            finish_reason: null,
            token_ids: this.req.return_token_ids ? (first ? event.tokenIds : []) : null,
          };
          frames.push(this.chunk(choice, state!.tokens));
        });
        break;
      }
      case "finish": {
        this.start(frames, undefined);
        const parser = this.toolParsers[event.choice];
        const held = this.partDeltas(event.choice, this.reasoningParsers[event.choice]?.finish() ?? []);
        for (const delta of [...held, ...(parser ? this.toolDeltas(event.choice, parser.finish()) : [])])
          frames.push(
            this.chunk(
              { index: event.choice, delta, logprobs: null, finish_reason: null },
              event.completionTokens,
            ),
          );
        const calledTools = parser !== undefined && parser.callCount > 0 && event.finishReason === "stop";
        const choice: ChatCompletionChunkChoice = {
          index: event.choice,
          delta: {},
          logprobs: null,
          finish_reason: calledTools ? "tool_calls" : event.finishReason,
          stop_reason: event.stopReason,
          token_ids: this.req.return_token_ids ? [] : null,
        };
        frames.push(this.chunk(choice, event.completionTokens));
        break;
      }
      case "done":
        this.start(frames, undefined);
        if (this.includeUsage) {
          const prompt = this.tracker.prompt;
          frames.push({
            type: "chunk",
            data: {
              ...this.envelope([]),
              usage: usage(
                prompt?.promptTokenIds.length ?? 0,
                this.tracker.completionTokens(),
                prompt?.cachedTokens ?? 0,
                this.tracker.reasoningTokens(),
              ),
            },
          });
        }
        this.ended = true;
        break;
      case "error":
        frames.push(this.fail(engineErrorToApiError(event)));
        break;
    }
    if (frames.some((f) => f.type === "chunk")) this.sentAny = true;
    return frames;
  }

  /** Reasoning as its own deltas (unless include_reasoning is false); the answer through the tool parser. */
  private partDeltas(choice: number, parts: ReasoningPart[]): ChunkDelta[] {
    const deltas: ChunkDelta[] = [];
    const parser = this.toolParsers[choice];
    for (const part of parts) {
      if (part.kind === "reasoning") {
        if (this.req.include_reasoning) deltas.push({ reasoning: part.text, reasoning_content: part.text });
      } else if (parser) deltas.push(...this.toolDeltas(choice, parser.push(part.text)));
      else deltas.push({ content: part.text });
    }
    return deltas;
  }

  /** The tool parser's output as deltas: content, or a call's header and then its arguments. */
  private toolDeltas(choice: number, outputs: ToolCallOutput[]): ChunkDelta[] {
    const deltas: ChunkDelta[] = [];
    for (const o of outputs) {
      if (o.kind === "content") deltas.push({ content: o.content });
      else if (o.kind === "call")
        for (const d of toolCallDeltas(this.toolCalls[choice]!++, o.call)) deltas.push({ tool_calls: [d] });
      else if (o.kind === "start")
        deltas.push({ tool_calls: [toolCallHeader(this.toolCalls[choice]!++, o.name)] });
      else
        deltas.push({
          tool_calls: [{ index: this.toolCalls[choice]! - 1, function: { arguments: o.arguments } }],
        });
    }
    return deltas;
  }

  /** The error frame for a failure the caller caught itself (e.g. the engine stream threw). */
  fail(error: ApiError): StreamFrame {
    this.ended = true;
    return { type: "error", error, data: error.toBody() };
  }

  /** Role chunks (and echo chunks) for every choice, once, when the first event arrives. */
  private start(frames: StreamFrame[], promptTokenIds: number[] | undefined): void {
    if (this.started) return;
    this.started = true;
    const role = responseRole(this.req);
    for (let i = 0; i < this.req.n; i++) {
      const frame = this.chunk(
        { index: i, delta: { role, content: "" }, logprobs: null, finish_reason: null },
        0,
      );
      if (i === 0 && this.req.return_token_ids && promptTokenIds)
        frame.data.prompt_token_ids = promptTokenIds;
      frames.push(frame);
    }
    const echo = echoText(this.req);
    if (echo)
      for (let i = 0; i < this.req.n; i++)
        frames.push(
          this.chunk({ index: i, delta: { content: echo }, logprobs: null, finish_reason: null }, 0),
        );
  }

  private envelope(choices: ChatCompletionChunkChoice[]): ChatCompletionChunk {
    return {
      id: this.id,
      object: "chat.completion.chunk",
      created: this.created,
      model: this.model,
      choices,
    };
  }

  private chunk(
    choice: ChatCompletionChunkChoice,
    completionTokens: number,
  ): { type: "chunk"; data: ChatCompletionChunk } {
    const data = this.envelope([choice]);
    if (this.continuousUsage)
      data.usage = usage(this.tracker.prompt?.promptTokenIds.length ?? 0, completionTokens);
    return { type: "chunk", data };
  }
}
