/**
 * Where a model's chat template and special tokens come from, read as transformers does:
 * `chat_template.jinja` (plus named ones in `additional_chat_templates/*.jinja`) takes priority,
 * then a processor's `chat_template.json`, then `chat_template` in tokenizer_config.json. A
 * template may be one string or several named ones ("default", "tool_use", ...).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { invalidRequest } from "../errors.ts";

export interface ChatTemplateSource {
  /** One template, or named templates (HF's list form `[{name, template}]` normalised to a record). */
  chatTemplate?: string | Record<string, string>;
  bosToken?: string;
  eosToken?: string;
  /** Other special tokens keyed by their template variable: unk_token, pad_token, sep_token, cls_token, mask_token. */
  specialTokens?: Record<string, string>;
  additionalSpecialTokens?: string[];
}

const OTHER_SPECIAL_TOKENS = ["unk_token", "sep_token", "pad_token", "cls_token", "mask_token"] as const;

function readJson(path: string): Record<string, unknown> | undefined {
  if (!existsSync(path)) return undefined;
  const parsed: unknown = JSON.parse(readFileSync(path, "utf8"));
  return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
}

/** Special tokens are plain strings or AddedToken objects (`{content: ...}`). */
function tokenText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "object" && value !== null) {
    const content = (value as { content?: unknown }).content;
    if (typeof content === "string") return content;
  }
  return undefined;
}

/** A `chat_template` value as stored in JSON: a string, a `[{name, template}]` list or a name → template map. */
export function normaliseChatTemplate(value: unknown): string | Record<string, string> | undefined {
  if (typeof value === "string") return value;
  const entries: [string, string][] = [];
  if (Array.isArray(value)) {
    for (const item of value) {
      const { name, template } = (item ?? {}) as { name?: unknown; template?: unknown };
      if (typeof name === "string" && typeof template === "string") entries.push([name, template]);
    }
  } else if (typeof value === "object" && value !== null) {
    for (const [name, template] of Object.entries(value)) {
      if (typeof template === "string") entries.push([name, template]);
    }
  }
  return entries.length > 0 ? Object.fromEntries(entries) : undefined;
}

function templateFiles(modelDir: string): string | Record<string, string> | undefined {
  const named: Record<string, string> = {};
  const main = join(modelDir, "chat_template.jinja");
  if (existsSync(main)) named.default = readFileSync(main, "utf8");
  const extraDir = join(modelDir, "additional_chat_templates");
  if (existsSync(extraDir)) {
    for (const file of readdirSync(extraDir)
      .filter((f) => f.endsWith(".jinja"))
      .sort()) {
      named[basename(file, ".jinja")] = readFileSync(join(extraDir, file), "utf8");
    }
  }
  const names = Object.keys(named);
  if (names.length === 0) return undefined;
  return names.length === 1 && names[0] === "default" ? named.default : named;
}

export function loadChatTemplateSource(modelDir: string): ChatTemplateSource {
  const config = readJson(join(modelDir, "tokenizer_config.json")) ?? {};
  const specialMap = readJson(join(modelDir, "special_tokens_map.json")) ?? {};
  const token = (key: string) => tokenText(config[key]) ?? tokenText(specialMap[key]);

  const source: ChatTemplateSource = {};
  const chatTemplate =
    templateFiles(modelDir) ??
    normaliseChatTemplate(readJson(join(modelDir, "chat_template.json"))?.chat_template) ??
    normaliseChatTemplate(config.chat_template);
  if (chatTemplate !== undefined) source.chatTemplate = chatTemplate;
  const bos = token("bos_token");
  if (bos !== undefined) source.bosToken = bos;
  const eos = token("eos_token");
  if (eos !== undefined) source.eosToken = eos;
  const special: Record<string, string> = {};
  for (const key of OTHER_SPECIAL_TOKENS) {
    const value = token(key);
    if (value !== undefined) special[key] = value;
  }
  if (Object.keys(special).length > 0) source.specialTokens = special;
  const extra = config.additional_special_tokens ?? specialMap.additional_special_tokens;
  if (Array.isArray(extra)) {
    source.additionalSpecialTokens = extra.map(tokenText).filter((t): t is string => t !== undefined);
  }
  return source;
}

/** True when `requested` is the name of one of the model's own templates rather than template text. */
export function namesModelTemplate(model: ChatTemplateSource["chatTemplate"], requested: string): boolean {
  return typeof model === "object" && Object.hasOwn(model, requested);
}

/**
 * The template text to render, following transformers' get_chat_template: a request template
 * wins (and may name one of the model's templates); among named templates "tool_use" is taken when
 * tools are given and it exists, else "default".
 */
export function selectTemplate(
  model: ChatTemplateSource["chatTemplate"],
  requested: string | undefined,
  hasTools: boolean,
): string {
  if (typeof model === "object") {
    if (requested !== undefined) return Object.hasOwn(model, requested) ? model[requested]! : requested;
    if (hasTools && Object.hasOwn(model, "tool_use")) return model.tool_use!;
    if (Object.hasOwn(model, "default")) return model.default!;
    throw invalidRequest(
      `This model has several chat templates and none is the default; pass \`chat_template\` with one of: ${Object.keys(model).sort().join(", ")}.`,
      "chat_template",
    );
  }
  const chosen = requested ?? model;
  if (chosen === undefined) {
    throw invalidRequest(
      "This model has no chat template (its tokenizer defines none and its directory has no chat_template.jinja), so it serves only /v1/completions; the operator can give it one as chat_template.jinja in the model's directory, or a request can pass `chat_template` to a server started with --trust-request-chat-template.",
      "chat_template",
    );
  }
  return chosen;
}
