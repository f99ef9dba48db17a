import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadChatTemplateSource, type RenderChatOptions, renderChat } from "../../src/chat/index.ts";
import { modelsDir } from "../../src/util/paths.ts";
import { SMOLLM2_DEFAULT_SYSTEM, SMOLLM2_TEMPLATE } from "./smollm2-template.ts";

const source = { chatTemplate: SMOLLM2_TEMPLATE, bosToken: "<|im_start|>", eosToken: "<|im_end|>" };

function render(partial: Partial<RenderChatOptions> & Pick<RenderChatOptions, "messages">): string {
  return renderChat(source, { addGenerationPrompt: true, continueFinalMessage: false, ...partial }).text;
}

describe("renderChat with the SmolLM2 template", () => {
  it("renders a single user turn with the default system prompt and the generation prompt", () => {
    expect(render({ messages: [{ role: "user", content: "Hi" }] })).toBe(
      `${SMOLLM2_DEFAULT_SYSTEM}<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n`,
    );
  });

  it("renders a multi-turn chat and keeps the caller's system prompt", () => {
    const text = render({
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello!" },
        { role: "user", content: "What is 2+2?" },
      ],
    });
    expect(text).toBe(
      "<|im_start|>system\nBe brief.<|im_end|>\n" +
        "<|im_start|>user\nHi<|im_end|>\n" +
        "<|im_start|>assistant\nHello!<|im_end|>\n" +
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n" +
        "<|im_start|>assistant\n",
    );
  });

  it("inserts the default system prompt before a leading developer or user message only", () => {
    expect(render({ messages: [{ role: "developer", content: "Rules" }] })).toBe(
      `${SMOLLM2_DEFAULT_SYSTEM}<|im_start|>developer\nRules<|im_end|>\n<|im_start|>assistant\n`,
    );
  });

  it("leaves the generation prompt out when add_generation_prompt is false", () => {
    expect(render({ messages: [{ role: "user", content: "Hi" }], addGenerationPrompt: false })).toBe(
      `${SMOLLM2_DEFAULT_SYSTEM}<|im_start|>user\nHi<|im_end|>\n`,
    );
  });

  it("continue_final_message ends the text right after the partial assistant content", () => {
    const text = render({
      messages: [
        { role: "user", content: "Count to five." },
        { role: "assistant", content: "One, two," },
      ],
      addGenerationPrompt: false,
      continueFinalMessage: true,
    });
    expect(text).toBe(
      `${SMOLLM2_DEFAULT_SYSTEM}<|im_start|>user\nCount to five.<|im_end|>\n<|im_start|>assistant\nOne, two,`,
    );
  });

  it("continue_final_message keeps trailing whitespace the template kept", () => {
    const text = render({
      messages: [
        { role: "user", content: "Say hi" },
        { role: "assistant", content: "Hi " },
      ],
      addGenerationPrompt: false,
      continueFinalMessage: true,
    });
    expect(text.endsWith("<|im_start|>assistant\nHi ")).toBe(true);
  });

  it("continue_final_message works for a final user message too", () => {
    const text = render({
      messages: [{ role: "user", content: "Once upon a" }],
      addGenerationPrompt: false,
      continueFinalMessage: true,
    });
    expect(text).toBe(`${SMOLLM2_DEFAULT_SYSTEM}<|im_start|>user\nOnce upon a`);
  });

  it("joins text-part arrays with newlines and renders null content as empty", () => {
    const text = render({
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "first" },
            { type: "text", text: "second" },
          ],
        },
        { role: "assistant", content: null },
      ],
      addGenerationPrompt: false,
    });
    expect(text).toBe(
      `${SMOLLM2_DEFAULT_SYSTEM}<|im_start|>user\nfirst\nsecond<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n`,
    );
  });
});

const modelDir = join(modelsDir(), "smollm2-135m-instruct");

describe.skipIf(!existsSync(join(modelDir, "tokenizer_config.json")))("the set-up SmolLM2 model", () => {
  it("ships the same template and special tokens", () => {
    const loaded = loadChatTemplateSource(modelDir);
    expect(loaded.chatTemplate).toBe(SMOLLM2_TEMPLATE);
    expect(loaded).toMatchObject({ bosToken: "<|im_start|>", eosToken: "<|im_end|>" });
    expect(loaded.specialTokens).toMatchObject({ pad_token: "<|im_end|>", unk_token: "<|endoftext|>" });
  });

  it("renders from the loaded source", () => {
    const text = renderChat(loadChatTemplateSource(modelDir), {
      messages: [{ role: "user", content: "Hi" }],
      addGenerationPrompt: true,
      continueFinalMessage: false,
    }).text;
    expect(text).toBe(`${SMOLLM2_DEFAULT_SYSTEM}<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n`);
  });
});
