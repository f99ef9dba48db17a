import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadChatTemplateSource } from "../../src/chat/index.ts";
import { selectTemplate } from "../../src/chat/source.ts";
import { ApiError } from "../../src/errors.ts";

const dirs: string[] = [];

function modelDir(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), "ortserve-chat-"));
  dirs.push(dir);
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), typeof content === "string" ? content : JSON.stringify(content));
  }
  return dir;
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("loadChatTemplateSource", () => {
  it("reads the template and special tokens, plain or as AddedToken objects", () => {
    const dir = modelDir({
      "tokenizer_config.json": {
        chat_template: "T",
        bos_token: { content: "<s>", special: true },
        eos_token: "</s>",
        pad_token: null,
        unk_token: "<unk>",
        additional_special_tokens: ["<x>", { content: "<y>" }],
      },
    });
    expect(loadChatTemplateSource(dir)).toEqual({
      chatTemplate: "T",
      bosToken: "<s>",
      eosToken: "</s>",
      specialTokens: { unk_token: "<unk>" },
      additionalSpecialTokens: ["<x>", "<y>"],
    });
  });

  it("normalises the list form of named templates", () => {
    const dir = modelDir({
      "tokenizer_config.json": {
        chat_template: [
          { name: "default", template: "D" },
          { name: "tool_use", template: "U" },
        ],
      },
    });
    expect(loadChatTemplateSource(dir).chatTemplate).toEqual({ default: "D", tool_use: "U" });
  });

  it("prefers chat_template.jinja and named files over the config", () => {
    const dir = modelDir({
      "tokenizer_config.json": { chat_template: "from-config" },
      "chat_template.jinja": "from-file",
    });
    expect(loadChatTemplateSource(dir).chatTemplate).toBe("from-file");
    const named = modelDir({
      "tokenizer_config.json": { chat_template: "from-config" },
      "chat_template.jinja": "D",
      "additional_chat_templates/tool_use.jinja": "U",
    });
    expect(loadChatTemplateSource(named).chatTemplate).toEqual({ default: "D", tool_use: "U" });
  });

  it("reads a processor's chat_template.json before the tokenizer config", () => {
    const dir = modelDir({
      "tokenizer_config.json": { chat_template: "from-config" },
      "chat_template.json": { chat_template: "from-json" },
    });
    expect(loadChatTemplateSource(dir).chatTemplate).toBe("from-json");
  });

  it("falls back to special_tokens_map.json and tolerates a model without any template", () => {
    const dir = modelDir({ "special_tokens_map.json": { eos_token: { content: "<|end|>" } } });
    expect(loadChatTemplateSource(dir)).toEqual({ eosToken: "<|end|>" });
  });
});

describe("selectTemplate", () => {
  it("answers a chat request to a model without a template (a base model) with a 400 naming the missing template and the remedies", () => {
    const source = loadChatTemplateSource(modelDir({ "tokenizer_config.json": { bos_token: "<bos>" } }));
    expect(source.chatTemplate).toBeUndefined();
    let error: unknown;
    try {
      selectTemplate(source.chatTemplate, undefined, false);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(400);
    expect((error as ApiError).message).toMatch(/no chat template.*\/v1\/completions.*chat_template\.jinja/);
    // The operator's file in the model directory is the template from then on.
    const withFile = loadChatTemplateSource(modelDir({ "chat_template.jinja": "T" }));
    expect(selectTemplate(withFile.chatTemplate, undefined, false)).toBe("T");
  });
});
