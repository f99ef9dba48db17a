/**
 * The Responses API response object, built from the chat completion the same engine events make:
 * output items (a message of output_text, then a function_call item per parsed call), the status
 * (incomplete when the token limit ended it), usage in the Responses shape, and the request's
 * settings echoed as OpenAI echoes them.
 */
import { randomBytes } from "node:crypto";
import type { EngineEvent, FinishReason } from "../../core/types.ts";
import type { LogprobEntry, Usage } from "../output-parts.ts";
import type { ChatCompletionAccumulator, ChatCompletionResponse } from "../response.ts";
import type { FunctionCallItem } from "./items.ts";
import type { ResponsesRequest, ResponsesToolChoice, TextFormat } from "./request.ts";

export interface OutputTextPart {
  type: "output_text";
  text: string;
  annotations: [];
  /** Each token's logprob with include message.output_text.logprobs; otherwise empty. */
  logprobs: LogprobEntry[];
}

export type ItemStatus = "in_progress" | "completed" | "incomplete";

export interface OutputMessage {
  id: string;
  type: "message";
  status: ItemStatus;
  role: "assistant";
  content: OutputTextPart[];
}

export interface OutputFunctionCall extends FunctionCallItem {
  id: string;
  status: ItemStatus;
}

/** A reasoning model's think block, before the answer's items. */
export interface OutputReasoning {
  id: string;
  type: "reasoning";
  status: ItemStatus;
  summary: [];
  content: { type: "reasoning_text"; text: string }[];
}

export type OutputItem = OutputReasoning | OutputMessage | OutputFunctionCall;

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export type ResponseStatus = "in_progress" | "completed" | "incomplete";

export interface ResponseObject {
  id: string;
  object: "response";
  created_at: number;
  status: ResponseStatus;
  background: false;
  completed_at: number | null;
  error: null;
  incomplete_details: { reason: "max_output_tokens" } | null;
  instructions: string | null;
  max_output_tokens: number | null;
  max_tool_calls: null;
  model: string;
  output: OutputItem[];
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  prompt_cache_key: string | null;
  reasoning: { effort: string | null; summary: null };
  safety_identifier: string | null;
  service_tier: "default";
  store: boolean;
  temperature: number | null;
  text: { format: TextFormat; verbosity: null };
  tool_choice: ResponsesToolChoice;
  tools: {
    type: "function";
    name: string;
    description: string | null;
    parameters: Record<string, unknown> | null;
    strict: boolean | null;
  }[];
  top_logprobs: number;
  top_p: number | null;
  truncation: "disabled" | "auto";
  usage: ResponsesUsage | null;
  user: string | null;
  metadata: Record<string, string>;
}

/** What a response needs beyond the request: its id, its model's name and its creation time. */
export interface ResponseMeta {
  id: string;
  model: string;
  createdAt: number;
}

/** OpenAI's id shapes: a prefix and 48 hex digits. */
export function newId(prefix: "resp" | "msg" | "fc" | "fco" | "rs"): string {
  return `${prefix}_${randomBytes(24).toString("hex")}`;
}

/** The chat usage in the Responses shape. */
export function responsesUsage(u: Usage): ResponsesUsage {
  const promptTokens = u.prompt_tokens;
  const outputTokens = u.completion_tokens;
  return {
    input_tokens: promptTokens,
    input_tokens_details: {
      cached_tokens: u.prompt_tokens_details?.cached_tokens ?? 0,
      cache_write_tokens: 0,
    },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: u.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: promptTokens + outputTokens,
  };
}

/** A chat finish → the response's status; only the token limit leaves it incomplete. */
export function responseStatus(finish: FinishReason | "tool_calls"): Exclude<ResponseStatus, "in_progress"> {
  return finish === "length" ? "incomplete" : "completed";
}

/** The response object around `output`: the request's settings echoed as OpenAI echoes them. */
export function responseObject(
  req: ResponsesRequest,
  meta: ResponseMeta,
  status: ResponseStatus,
  output: OutputItem[],
  usage: ResponsesUsage | null,
): ResponseObject {
  const w = req.wire;
  const tools = w.tools ?? [];
  return {
    id: meta.id,
    object: "response",
    created_at: meta.createdAt,
    status,
    background: false,
    completed_at: status === "in_progress" ? null : Math.floor(Date.now() / 1000),
    error: null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: w.instructions ?? null,
    max_output_tokens: w.max_output_tokens ?? null,
    max_tool_calls: null,
    model: meta.model,
    output,
    parallel_tool_calls: w.parallel_tool_calls,
    previous_response_id: w.previous_response_id ?? null,
    prompt_cache_key: w.prompt_cache_key ?? null,
    reasoning: { effort: w.reasoning?.effort ?? null, summary: null },
    safety_identifier: w.safety_identifier ?? null,
    service_tier: "default",
    store: w.store,
    temperature: w.temperature ?? null,
    text: { format: w.text?.format ?? { type: "text" }, verbosity: null },
    tool_choice: w.tool_choice ?? (tools.length > 0 ? "auto" : "none"),
    tools: tools.map((t) => ({
      type: "function",
      name: t.name,
      description: t.description ?? null,
      parameters: t.parameters ?? null,
      strict: t.strict ?? null,
    })),
    top_logprobs: w.top_logprobs ?? 0,
    top_p: w.top_p ?? null,
    truncation: w.truncation ?? "disabled",
    usage,
    user: w.user ?? null,
    metadata: w.metadata ?? {},
  };
}

export function reasoningItem(id: string, text: string, status: ItemStatus): OutputReasoning {
  return { id, type: "reasoning", status, summary: [], content: [{ type: "reasoning_text", text }] };
}

export function outputMessage(
  id: string,
  text: string,
  status: ItemStatus,
  logprobs: LogprobEntry[] = [],
): OutputMessage {
  return {
    id,
    type: "message",
    status,
    role: "assistant",
    content: [{ type: "output_text", text, annotations: [], logprobs }],
  };
}

/**
 * The chat completion's one choice as output items: its text (when any, or when nothing else) with
 * the tokens' logprobs when asked for (text answers only, request.ts), then its calls.
 */
export function outputItems(chat: ChatCompletionResponse): OutputItem[] {
  const choice = chat.choices[0]!;
  const status = responseStatus(choice.finish_reason) === "incomplete" ? "incomplete" : "completed";
  const text = choice.message.content ?? "";
  const calls = choice.message.tool_calls;
  const thought = choice.message.reasoning;
  return [
    ...(thought !== null
      ? [reasoningItem(newId("rs"), thought, choice.message.content === null ? status : "completed")]
      : []),
    // Output that ended inside the think block has no message (content null), only the reasoning.
    ...(text !== "" || (calls.length === 0 && choice.message.content !== null)
      ? [outputMessage(newId("msg"), text, status, choice.logprobs?.content ?? [])]
      : []),
    ...calls.map(
      (c): OutputFunctionCall => ({
        id: newId("fc"),
        type: "function_call",
        status: "completed",
        call_id: c.id,
        name: c.function.name,
        arguments: c.function.arguments,
      }),
    ),
  ];
}

export function toResponseObject(
  req: ResponsesRequest,
  meta: ResponseMeta,
  chat: ChatCompletionResponse,
): ResponseObject {
  return responseObject(
    req,
    meta,
    responseStatus(chat.choices[0]!.finish_reason),
    outputItems(chat),
    responsesUsage(chat.usage),
  );
}

/** The chat accumulator's response, in the Responses shape. */
export class ResponsesAccumulator {
  private readonly chat: ChatCompletionAccumulator;
  private readonly req: ResponsesRequest;
  private readonly meta: ResponseMeta;

  constructor(chat: ChatCompletionAccumulator, req: ResponsesRequest, meta: ResponseMeta) {
    this.chat = chat;
    this.req = req;
    this.meta = meta;
  }

  push(event: EngineEvent): void {
    this.chat.push(event);
  }

  result(): ResponseObject {
    return toResponseObject(this.req, this.meta, this.chat.result());
  }
}
