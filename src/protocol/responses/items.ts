/**
 * Responses API conversation items, as a request's `input` carries them and as a stored response
 * keeps them: messages (input_text parts; an assistant's output_text), function calls and their
 * outputs. Their translation into chat messages lives here too, so a stored conversation and a
 * new one reach the chat template the same way.
 */
import { unsupportedField } from "../../errors.ts";
import type { ChatMessage, ToolCall } from "../messages.ts";
import {
  array,
  isArray,
  isPlainObject,
  isString,
  jsonObject,
  literal,
  object,
  optional,
  required,
  type Schema,
  string,
  tagged,
  union,
  valueError,
} from "../schema.ts";

const nullable = { nullable: true };

/** Media parts: each one is a 400 on a text-only model. */
const MEDIA_PARTS = ["input_image", "input_file", "input_audio"];

const rejectPart = (expected: string) => (type: string, typePath: string) =>
  MEDIA_PARTS.includes(type)
    ? unsupportedField(typePath, `"${type}" content needs a multimodal model; the served model is text-only`)
    : valueError(typePath, `unknown content part type ${JSON.stringify(type)}; expected ${expected}.`);

export interface InputText {
  type: "input_text";
  text: string;
}
export interface OutputText {
  type: "output_text";
  text: string;
}
export interface Refusal {
  type: "refusal";
  refusal: string;
}

const inputText: Schema<InputText> = object({
  type: required(literal(["input_text"])),
  text: required(string()),
});

const inputPart = tagged<InputText>(
  "type",
  { input_text: inputText },
  { reject: rejectPart('"input_text"') },
);

const outputPart = tagged<OutputText | Refusal>(
  "type",
  {
    // A response's output sent back as input carries its output-only fields too.
    output_text: object({
      type: required(literal(["output_text"])),
      text: required(string()),
      annotations: optional(array(jsonObject()), nullable),
      logprobs: optional(array(jsonObject()), nullable),
    }),
    refusal: object({ type: required(literal(["refusal"])), refusal: required(string()) }),
  },
  { reject: rejectPart('"output_text" or "refusal"') },
) as Schema<OutputText | Refusal>;

const status = optional(literal(["in_progress", "completed", "incomplete"]), nullable);
const phase = optional(literal(["commentary", "final_answer"]), {
  ...nullable,
  description: "Accepted; it does not change the prompt.",
});

export type InputRole = "user" | "system" | "developer";

export type MessageItem =
  | { type: "message"; role: InputRole; content: string | InputText[] }
  | { type: "message"; role: "assistant"; content: string | (OutputText | Refusal)[]; id?: string };

export interface FunctionCallItem {
  type: "function_call";
  call_id: string;
  name: string;
  arguments: string;
  id?: string;
}

export interface FunctionCallOutputItem {
  type: "function_call_output";
  call_id: string;
  output: string | InputText[];
}

/**
 * A reasoning model's think block from an earlier turn (a reasoning output item sent back): its
 * text reaches the template as the next assistant turn's reasoning. Summaries and encrypted
 * content are other servers' and say nothing here.
 */
export interface ReasoningItem {
  type: "reasoning";
  content?: { type: "reasoning_text"; text: string }[];
  id?: string;
}

export type InputItem = MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem;

const inputContent = union<string | InputText[]>(
  [
    { when: isString, schema: string() },
    { when: isArray, schema: array(inputPart) },
  ],
  "a string or an array of input_text parts",
);

const inputMessage = (role: InputRole) =>
  object({
    type: optional(literal(["message"])),
    role: required(literal([role])),
    content: required(inputContent),
    id: optional(string(), nullable),
    status,
    phase,
  });

const assistantMessage = object({
  type: optional(literal(["message"])),
  role: required(literal(["assistant"])),
  content: required(
    union<string | (OutputText | Refusal)[]>(
      [
        { when: isString, schema: string() },
        { when: isArray, schema: array(outputPart) },
      ],
      "a string or an array of output_text parts",
    ),
  ),
  id: optional(string(), nullable),
  status,
  phase,
});

const messageItem = tagged<MessageItem>(
  "role",
  {
    user: inputMessage("user"),
    system: inputMessage("system"),
    developer: inputMessage("developer"),
    assistant: assistantMessage,
  } as Record<string, Schema<MessageItem>>,
  {
    reject: (role, path) =>
      valueError(
        path,
        `expected "user", "system", "developer" or "assistant", but got ${JSON.stringify(role)}.`,
      ),
  },
);

const functionCallItem: Schema<FunctionCallItem> = object({
  type: required(literal(["function_call"])),
  call_id: required(string({ minLength: 1 })),
  name: required(string({ minLength: 1 })),
  arguments: required(string()),
  id: optional(string(), nullable),
  status,
}) as Schema<FunctionCallItem>;

const functionCallOutputItem: Schema<FunctionCallOutputItem> = object({
  type: required(literal(["function_call_output"])),
  call_id: required(string({ minLength: 1 })),
  output: required(inputContent),
  id: optional(string(), nullable),
  status,
}) as Schema<FunctionCallOutputItem>;

/** Items of tools this server does not serve (only function tools are). */
const OTHER_TOOL_ITEMS = [
  "file_search_call",
  "computer_call",
  "computer_call_output",
  "web_search_call",
  "image_generation_call",
  "code_interpreter_call",
  "local_shell_call",
  "local_shell_call_output",
  "shell_call",
  "shell_call_output",
  "apply_patch_call",
  "apply_patch_call_output",
  "mcp_list_tools",
  "mcp_approval_request",
  "mcp_approval_response",
  "mcp_call",
  "custom_tool_call",
  "custom_tool_call_output",
  "tool_search_call",
  "tool_search_output",
];

const reasoningItem: Schema<ReasoningItem> = object({
  type: required(literal(["reasoning"])),
  id: optional(string()),
  summary: optional(array(jsonObject())),
  content: optional(
    array(object({ type: required(literal(["reasoning_text"])), text: required(string()) })),
    nullable,
  ),
  encrypted_content: optional(string(), nullable),
  status,
}) as Schema<ReasoningItem>;

function rejectItem(type: string, typePath: string) {
  if (type === "item_reference")
    return unsupportedField(
      typePath,
      "item references: send the item itself, or continue a stored response with previous_response_id",
    );
  if (OTHER_TOOL_ITEMS.includes(type))
    return unsupportedField(typePath, `"${type}" items: only function tools are served`);
  return valueError(
    typePath,
    `unknown item type ${JSON.stringify(type)}; expected "message", "function_call", "function_call_output" or "reasoning".`,
  );
}

const typedItem = tagged<InputItem>(
  "type",
  {
    message: messageItem,
    function_call: functionCallItem,
    function_call_output: functionCallOutputItem,
    reasoning: reasoningItem,
  } as Record<string, Schema<InputItem>>,
  { reject: rejectItem },
);

/** One input item; a message may leave out its `type` (OpenAI's easy input message). */
export const inputItemSchema: Schema<InputItem> = {
  parse(value, path) {
    const item =
      isPlainObject(value) && !Object.hasOwn(value, "type")
        ? messageItem.parse(value, path)
        : typedItem.parse(value, path);
    return normalise(item);
  },
  jsonSchema: () => typedItem.jsonSchema(),
};

/** Only the fields the conversation needs: what is stored and what reaches the template. */
function normalise(item: InputItem): InputItem {
  switch (item.type ?? "message") {
    case "function_call": {
      const c = item as FunctionCallItem;
      return { type: "function_call", call_id: c.call_id, name: c.name, arguments: c.arguments };
    }
    case "function_call_output": {
      const o = item as FunctionCallOutputItem;
      return { type: "function_call_output", call_id: o.call_id, output: o.output };
    }
    case "reasoning": {
      const r = item as ReasoningItem;
      return {
        type: "reasoning",
        content: (r.content ?? []).map((c) => ({ type: "reasoning_text", text: c.text })),
      };
    }
    default: {
      const m = item as MessageItem;
      return { type: "message", role: m.role, content: m.content } as MessageItem;
    }
  }
}

const textOf = (content: string | (InputText | OutputText | Refusal)[]): string =>
  typeof content === "string"
    ? content
    : content.map((p) => (p.type === "refusal" ? p.refusal : p.text)).join("\n");

/**
 * Items as chat messages: `instructions` first as the system message; developer messages as system
 * messages (chat templates know system, few know developer); consecutive function calls join the
 * assistant message before them as its tool_calls; each function_call_output is a tool message;
 * a reasoning item's text is the reasoning of the assistant turn that follows it.
 */
export function chatMessages(instructions: string | undefined, items: readonly InputItem[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (instructions !== undefined) out.push({ role: "system", content: instructions });
  let reasoning: string | undefined;
  const assistant = (message: ChatMessage): ChatMessage => {
    if (reasoning !== undefined) message.reasoning = reasoning;
    reasoning = undefined;
    return message;
  };
  for (const item of items) {
    if (item.type === "reasoning") {
      const text = (item.content ?? []).map((c) => c.text).join("\n");
      reasoning = reasoning === undefined ? text : `${reasoning}\n${text}`;
    } else if (item.type === "function_call") {
      const call: ToolCall = {
        id: item.call_id,
        type: "function",
        function: { name: item.name, arguments: item.arguments },
      };
      const last = out.at(-1);
      if (last?.role === "assistant" && reasoning === undefined)
        last.tool_calls = [...(last.tool_calls ?? []), call];
      else out.push(assistant({ role: "assistant", content: "", tool_calls: [call] }));
    } else if (item.type === "function_call_output")
      out.push({ role: "tool", tool_call_id: item.call_id, content: textOf(item.output) });
    else if (item.role === "assistant")
      out.push(assistant({ role: "assistant", content: textOf(item.content) }));
    else
      out.push({
        role: item.role === "developer" ? "system" : item.role,
        content: textOf(item.content),
      });
  }
  return out;
}

/** A response's output items as the input items of the conversation that continues it. */
export function outputAsInput(
  output: readonly (
    | { type: "message"; content: { type: "output_text"; text: string }[]; id?: string }
    | { type: "function_call"; call_id: string; name: string; arguments: string; id?: string }
    | { type: "reasoning"; content?: { type: "reasoning_text"; text: string }[]; id?: string }
  )[],
): InputItem[] {
  return output.map((o): InputItem => {
    // The output item's id stays with it (the input items list names it so).
    const id = o.id === undefined ? {} : { id: o.id };
    if (o.type === "function_call")
      return { type: "function_call", call_id: o.call_id, name: o.name, arguments: o.arguments, ...id };
    if (o.type === "reasoning")
      return {
        type: "reasoning",
        content: (o.content ?? []).map((c) => ({ type: "reasoning_text", text: c.text })),
        ...id,
      };
    return {
      type: "message",
      role: "assistant",
      content: o.content.map((p) => ({ type: "output_text" as const, text: p.text })),
      ...id,
    };
  });
}
