/**
 * Renders a model's chat template (tokenizer_config.json `chat_template`) to
 * the prompt text the model was trained on.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";

export interface ChatMessage {
  role: string;
  content: string;
}

export interface ChatTemplate {
  render(messages: readonly ChatMessage[], addGenerationPrompt?: boolean): string;
}

/** Special tokens appear either as plain strings or as AddedToken objects. */
function tokenText(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof (v as { content?: unknown }).content === "string") {
    return (v as { content: string }).content;
  }
  return undefined;
}

/** `chat_template` is a string, or a list of named templates of which "default" is the chat one. */
function pickTemplate(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) {
    const named = v as { name?: string; template?: string }[];
    return (named.find((t) => t.name === "default") ?? named[0])?.template;
  }
  return undefined;
}

export function chatTemplateFrom(tokenizerConfig: Record<string, unknown>): ChatTemplate {
  const source = pickTemplate(tokenizerConfig.chat_template);
  if (!source) throw new Error("tokenizer_config.json has no chat_template");
  const template = new Template(source);
  const bos_token = tokenText(tokenizerConfig.bos_token) ?? "";
  const eos_token = tokenText(tokenizerConfig.eos_token) ?? "";
  return {
    render: (messages, addGenerationPrompt = true) =>
      template.render({ messages, add_generation_prompt: addGenerationPrompt, bos_token, eos_token }),
  };
}

export async function loadChatTemplate(modelDir: string): Promise<ChatTemplate> {
  const raw = await readFile(join(modelDir, "tokenizer_config.json"), "utf8");
  return chatTemplateFrom(JSON.parse(raw) as Record<string, unknown>);
}
