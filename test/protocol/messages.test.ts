/** Messages: roles, content forms, text-only rejection, paths in errors. */
import { describe, expect, it } from "vitest";
import { contentText } from "../../src/protocol/messages.ts";
import { expect400, parse } from "./helpers.ts";

const msgs = (...messages: unknown[]) => parse({ messages }).messages;

describe("roles", () => {
  it("accepts every OpenAI role with its fields", () => {
    const call = { id: "call_1", type: "function", function: { name: "f", arguments: '{"a":1}' } };
    const out = msgs(
      { role: "developer", content: "d" },
      { role: "system", content: "s", name: "sys" },
      { role: "user", content: "u", name: "alice" },
      { role: "assistant", content: null, tool_calls: [call], reasoning: "because" },
      { role: "tool", content: "42", tool_call_id: "call_1" },
      { role: "function", content: "old", name: "f" },
      { role: "assistant", content: "done" },
    );
    expect(out).toEqual([
      { role: "developer", content: "d" },
      { role: "system", content: "s", name: "sys" },
      { role: "user", content: "u", name: "alice" },
      { role: "assistant", tool_calls: [call], reasoning: "because" },
      { role: "tool", content: "42", tool_call_id: "call_1" },
      { role: "function", content: "old", name: "f" },
      { role: "assistant", content: "done" },
    ]);
  });

  it("accepts any other role as a generic message", () => {
    expect(msgs({ role: "observer", content: "x", name: "n" }, { role: "user", content: "y" })[0]).toEqual({
      role: "observer",
      content: "x",
      name: "n",
    });
  });

  it("accepts a previous response message sent back as history", () => {
    const echoed = {
      role: "assistant",
      content: "Hi!",
      refusal: null,
      annotations: null,
      audio: null,
      function_call: null,
      tool_calls: [],
      reasoning: null,
    };
    expect(msgs(USER_MSG, echoed, USER_MSG)[1]).toEqual({
      role: "assistant",
      content: "Hi!",
      tool_calls: [],
    });
  });

  it("reasoning_content is the older spelling of reasoning", () => {
    expect(msgs({ role: "assistant", content: "a", reasoning_content: "r" })[0]).toEqual({
      role: "assistant",
      content: "a",
      reasoning: "r",
    });
  });

  it("requires role, and content where the role needs it", () => {
    expect400(() => msgs({ content: "x" }), "messages[0].role", "missing_required_parameter");
    expect400(() => msgs({ role: 5, content: "x" }), "messages[0].role", "invalid_type");
    expect400(() => msgs({ role: "user" }), "messages[0].content", "missing_required_parameter");
    expect400(() => msgs({ role: "user", content: null }), "messages[0].content", "invalid_type");
    expect400(() => msgs({ role: "tool", content: "x" }), "messages[0].tool_call_id");
    expect400(() => msgs({ role: "function", content: "x" }), "messages[0].name");
    expect(msgs({ role: "assistant" })[0]).toEqual({ role: "assistant" });
  });

  it("rejects fields a role does not have, with the path", () => {
    expect400(
      () => msgs(USER_MSG, { role: "user", content: "x", tool_call_id: "c" }),
      "messages[1].tool_call_id",
    );
    expect400(() => msgs({ role: "system", content: "x", tool_calls: [] }), "messages[0].tool_calls");
  });

  it("checks tool calls field by field", () => {
    expect400(
      () => msgs({ role: "assistant", tool_calls: [{ id: "c", type: "function", function: { name: "f" } }] }),
      "messages[0].tool_calls[0].function.arguments",
    );
    expect400(
      () =>
        msgs({
          role: "assistant",
          tool_calls: [{ id: "c", type: "x", function: { name: "f", arguments: "" } }],
        }),
      "messages[0].tool_calls[0].type",
    );
  });

  it("rejects assistant audio: the model is text-only", () => {
    expect400(
      () => msgs({ role: "assistant", audio: { id: "a1" } }),
      "messages[0].audio",
      "unsupported_parameter",
    );
  });
});

const USER_MSG = { role: "user", content: "Hello" };

describe("content", () => {
  it("accepts a string or text parts, and turns other text-bearing parts into text parts", () => {
    const [m] = msgs({
      role: "user",
      content: [
        { type: "text", text: "a" },
        { type: "input_text", text: "b" },
        { type: "output_text", text: "c" },
        { type: "refusal", refusal: "d" },
        { type: "thinking", thinking: "e", closed: true },
      ],
    });
    expect(m!.content).toEqual(["a", "b", "c", "d", "e"].map((text) => ({ type: "text", text })));
  });

  it("names wrong types with their path", () => {
    expect400(
      () => msgs(USER_MSG, USER_MSG, { role: "user", content: 5 }),
      "messages[2].content",
      "invalid_type",
    );
    expect400(() => msgs({ role: "user", content: ["x"] }), "messages[0].content[0]", "invalid_type");
    expect400(
      () => msgs({ role: "user", content: [{ type: "text", text: 1 }] }),
      "messages[0].content[0].text",
    );
    expect400(() => msgs({ role: "user", content: [{ text: "x" }] }), "messages[0].content[0].type");
    expect400(
      () => msgs({ role: "user", content: [{ type: "text", text: "x", extra: 1 }] }),
      "messages[0].content[0].extra",
    );
  });

  it("rejects media parts naming messages[i].content[j].type (text-only model)", () => {
    const media = [
      { type: "image_url", image_url: { url: "https://x/y.png" } },
      { type: "input_audio", input_audio: { data: "", format: "wav" } },
      { type: "file", file: { file_id: "f" } },
      { type: "video_url", video_url: { url: "v" } },
      { type: "audio_url", audio_url: { url: "a" } },
    ];
    for (const part of media) {
      const e = expect400(
        () => msgs(USER_MSG, { role: "user", content: [{ type: "text", text: "look" }, part] }),
        "messages[1].content[1].type",
        "unsupported_parameter",
      );
      expect(e.message).toContain("text-only");
    }
  });

  it("rejects an unknown part type as an invalid value", () => {
    expect400(
      () => msgs({ role: "user", content: [{ type: "sticker" }] }),
      "messages[0].content[0].type",
      "invalid_value",
    );
  });
});

describe("contentText", () => {
  it("joins text parts with newlines, as vLLM's string content format", () => {
    expect(contentText("x")).toBe("x");
    expect(contentText(null)).toBe("");
    expect(contentText(undefined)).toBe("");
    expect(
      contentText([
        { type: "text", text: "a" },
        { type: "text", text: "b" },
      ]),
    ).toBe("a\nb");
  });
});
