/**
 * vLLM's `/tokenize` and `/detokenize`: a prompt (or chat messages through the model's template,
 * parsed by the chat request's own rules) → its token ids; token ids → their text.
 */
import { type ChatCompletionRequest, parseChatCompletionRequest } from "./chat-request.ts";
import { messagesSchema } from "./messages.ts";
import { toolSchema } from "./request-fields.ts";
import {
  array,
  boolean,
  documented,
  type Infer,
  integer,
  isPlainObject,
  jsonObject,
  object,
  optional,
  required,
  string,
  transform,
  union,
  withDefault,
} from "./schema.ts";

const nullable = { nullable: true };
const model = required(string(), { description: "Model ID (a model, or <model>:step<N> for a checkpoint)." });

const promptForm = object(
  {
    model,
    prompt: required(string(), { description: "The text to tokenize." }),
    add_special_tokens: withDefault(boolean(), true, { description: "Add special tokens such as BOS." }),
  },
  { description: "A text prompt." },
);

const chatFields = {
  model,
  messages: required(messagesSchema, { description: "Rendered through the model's chat template." }),
  add_generation_prompt: withDefault(boolean(), true),
  continue_final_message: withDefault(boolean(), false, {
    description: "Continue the final message; needs add_generation_prompt=false.",
  }),
  add_special_tokens: withDefault(boolean(), false, {
    description: "Add special tokens on top of the template's.",
  }),
  tools: optional(array(toolSchema, { minItems: 1 }), nullable),
  chat_template: optional(string(), nullable),
  chat_template_kwargs: optional(jsonObject(), nullable),
};
// Its rules across fields are the chat request's (checked there); JSON Schema states this one.
const chatForm = documented(object(chatFields, { description: "Chat messages." }), {
  anyOf: [
    { properties: { continue_final_message: { const: false } } },
    { properties: { add_generation_prompt: { const: false } }, required: ["add_generation_prompt"] },
  ],
});

export type TokenizeRequest =
  | { kind: "prompt"; model: string; prompt: string; addSpecialTokens: boolean }
  | { kind: "chat"; model: string; chat: ChatCompletionRequest };

export const tokenizeRequestSchema = union<TokenizeRequest>(
  [
    {
      when: (v) => isPlainObject(v) && Object.hasOwn(v, "messages"),
      schema: transform(chatForm, (v) => ({
        kind: "chat" as const,
        model: v.model,
        chat: parseChatCompletionRequest(v),
      })),
    },
    {
      when: isPlainObject,
      schema: transform(promptForm, (v) => ({
        kind: "prompt" as const,
        model: v.model,
        prompt: v.prompt,
        addSpecialTokens: v.add_special_tokens,
      })),
    },
  ],
  "an object with prompt or messages",
);

export function parseTokenizeRequest(body: unknown): TokenizeRequest {
  return tokenizeRequestSchema.parse(body, "");
}

export interface TokenizeResponse {
  count: number;
  max_model_len: number;
  tokens: number[];
  token_strs: null;
}

export const detokenizeRequestSchema = object(
  {
    model,
    tokens: required(array(integer({ minimum: 0 })), { description: "Token ids of the model's vocabulary." }),
  },
  { description: "Token ids to turn back into text." },
);
export type DetokenizeRequest = Infer<typeof detokenizeRequestSchema>;

export function parseDetokenizeRequest(body: unknown): DetokenizeRequest {
  return detokenizeRequestSchema.parse(body, "");
}

export const tokenizeResponseSchema = {
  type: "object",
  properties: {
    count: { type: "integer", minimum: 0 },
    max_model_len: { type: "integer", minimum: 1 },
    tokens: { type: "array", items: { type: "integer", minimum: 0 } },
    token_strs: { type: "null" },
  },
  required: ["count", "max_model_len", "tokens", "token_strs"],
  additionalProperties: false,
};

export const detokenizeResponseSchema = {
  type: "object",
  properties: { prompt: { type: "string" } },
  required: ["prompt"],
  additionalProperties: false,
};
