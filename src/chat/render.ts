/**
 * renderChat: a chat completion request's messages → the prompt text, as vLLM's chat endpoint
 * builds it (ChatCompletionRequest.build_chat_params + apply_hf_chat_template + transformers'
 * apply_chat_template). Tokenization, and whether special tokens are added on top, is the caller's.
 */
import { invalidRequest } from "../errors.ts";
import { cutAfterFinalMessage } from "./continue-final.ts";
import { toTemplateMessages } from "./conversation.ts";
import { type ChatTemplateSource, selectTemplate } from "./source.ts";
import { compileTemplate, renderTemplate } from "./template.ts";
import type { ChatMessage, ChatTool, ReasoningEffort } from "./types.ts";

export interface RenderChatOptions {
  messages: readonly ChatMessage[];
  /** Request override: a template, or the name of one of the model's named templates. */
  chatTemplate?: string;
  chatTemplateKwargs?: Readonly<Record<string, unknown>>;
  addGenerationPrompt: boolean;
  continueFinalMessage: boolean;
  tools?: readonly ChatTool[];
  documents?: readonly Record<string, unknown>[];
  reasoningEffort?: ReasoningEffort;
}

export interface RenderedChat {
  text: string;
}

// vLLM refuses chat_template and tokenize in chat_template_kwargs; messages, conversation and tools
// are already passed by apply_chat_template itself, where a duplicate is a TypeError (a 400 in vLLM).
const REJECTED_KWARGS = ["chat_template", "tokenize", "messages", "conversation", "tools"];

// apply_chat_template parameters that steer tokenization rather than reach the template.
const CONSUMED_KWARGS = new Set([
  "continue_final_message",
  "padding",
  "truncation",
  "max_length",
  "return_tensors",
  "return_dict",
  "return_assistant_tokens_mask",
  "tokenizer_kwargs",
]);

function specialTokens(source: ChatTemplateSource): Record<string, unknown> {
  const tokens: Record<string, unknown> = { ...source.specialTokens };
  if (source.bosToken !== undefined) tokens.bos_token = source.bosToken;
  if (source.eosToken !== undefined) tokens.eos_token = source.eosToken;
  if (source.additionalSpecialTokens !== undefined)
    tokens.additional_special_tokens = source.additionalSpecialTokens;
  return tokens;
}

/** The request's own fields win over chat_template_kwargs unless they are unset (vLLM merge_kwargs). */
function templateKwargs(opts: RenderChatOptions): Record<string, unknown> {
  const user = opts.chatTemplateKwargs ?? {};
  if (typeof user !== "object" || Array.isArray(user)) {
    throw invalidRequest("`chat_template_kwargs` must be an object.", "chat_template_kwargs");
  }
  for (const key of REJECTED_KWARGS) {
    if (Object.hasOwn(user, key)) {
      throw invalidRequest(`\`chat_template_kwargs\` may not set \`${key}\`.`, "chat_template_kwargs");
    }
  }
  const kwargs: Record<string, unknown> = { ...user, add_generation_prompt: opts.addGenerationPrompt };
  if (opts.documents != null) kwargs.documents = opts.documents;
  if (opts.reasoningEffort != null) {
    kwargs.reasoning_effort = opts.reasoningEffort;
    // Templates with an opt-in thinking switch (Qwen3, Gemma) turn it on when reasoning is requested.
    if (!Object.hasOwn(user, "enable_thinking")) kwargs.enable_thinking = true;
  }
  for (const key of CONSUMED_KWARGS) delete kwargs[key];
  return kwargs;
}

function checkDocuments(documents: unknown): void {
  if (documents == null) return;
  if (
    !Array.isArray(documents) ||
    documents.some((d) => typeof d !== "object" || d === null || Array.isArray(d))
  ) {
    throw invalidRequest(
      "`documents` must be a list of objects (each with `title` and `text`).",
      "documents",
    );
  }
}

export function renderChat(source: ChatTemplateSource, opts: RenderChatOptions): RenderedChat {
  if (opts.continueFinalMessage && opts.addGenerationPrompt) {
    throw invalidRequest(
      "continue_final_message and add_generation_prompt cannot both be true: the final message cannot stay open while a new one is started.",
      "continue_final_message",
    );
  }
  const hasTools = opts.tools != null;
  const compiled = compileTemplate(
    selectTemplate(source.chatTemplate, opts.chatTemplate || undefined, hasTools),
  );
  const messages = toTemplateMessages(opts.messages, compiled.contentFormat);
  const kwargs = templateKwargs(opts);
  checkDocuments(kwargs.documents);

  // transformers: special tokens, overridden by kwargs; messages and tools are set by the call itself.
  const text = renderTemplate(compiled, {
    ...specialTokens(source),
    ...kwargs,
    messages,
    tools: hasTools ? opts.tools : null,
    documents: kwargs.documents ?? null,
  });
  if (!opts.continueFinalMessage) return { text };
  const last = messages.at(-1);
  if (last === undefined)
    throw invalidRequest("continue_final_message needs a final message to continue.", "messages");
  return { text: cutAfterFinalMessage(text, last.content) };
}
