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

export type InputItem = MessageItem | FunctionCallItem | FunctionCallOutputItem;

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

function rejectItem(type: string, typePath: string) {
  // Debt: reasoning items are refused until reasoning output is served (then they carry its text).
  if (type === "reasoning")
    return unsupportedField(typePath, "reasoning items: this server does not serve reasoning output yet");
  if (type === "item_reference")
    return unsupportedField(
      typePath,
      "item references: send the item itself, or continue a stored response with previous_response_id",
    );
  if (OTHER_TOOL_ITEMS.includes(type))
    return unsupportedField(typePath, `"${type}" items: only function tools are served`);
  return valueError(
    typePath,
    `unknown item type ${JSON.stringify(type)}; expected "message", "function_call" or "function_call_output".`,
  );
}

const typedItem = tagged<InputItem>(
  "type",
  {
    message: messageItem,
    function_call: functionCallItem,
    function_call_output: functionCallOutputItem,
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
 * assistant message before them as its tool_calls; each function_call_output is a tool message.
 */
export function chatMessages(instructions: string | undefined, items: readonly InputItem[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (instructions !== undefined) out.push({ role: "system", content: instructions });
  for (const item of items) {
    if (item.type === "function_call") {
      const call: ToolCall = {
        id: item.call_id,
        type: "function",
        function: { name: item.name, arguments: item.arguments },
      };
      const last = out.at(-1);
      if (last?.role === "assistant") last.tool_calls = [...(last.tool_calls ?? []), call];
      else out.push({ role: "assistant", content: "", tool_calls: [call] });
    } else if (item.type === "function_call_output")
      out.push({ role: "tool", tool_call_id: item.call_id, content: textOf(item.output) });
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
    | { type: "message"; content: { type: "output_text"; text: string }[] }
    | { type: "function_call"; call_id: string; name: string; arguments: string }
  )[],
): InputItem[] {
  return output.map((o) =>
    o.type === "function_call"
      ? { type: "function_call", call_id: o.call_id, name: o.name, arguments: o.arguments }
      : {
          type: "message",
          role: "assistant",
          content: o.content.map((p) => ({ type: "output_text" as const, text: p.text })),
        },
  );
}
