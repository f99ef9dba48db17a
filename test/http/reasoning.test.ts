/**
 * A reasoning model's chat output over HTTP: the same weights served twice, once plain and once
 * with `reasoning_parser: deepseek_r1` and a template that opens the think block. The reasoning
 * model's reasoning and content must be exactly the plain model's text split at `</think>`, in the
 * plain response, the stream, and with include_reasoning false.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { splitReasoning } from "../../src/protocol/reasoning/think-parser.ts";
import { DIGIT_ANSWER_SCHEMA, isDigitAnswer } from "../fixtures/digit-answer.ts";
import { addSyntheticModel, chat, chatStream, type Harness, startHarness } from "./harness.ts";

const TEMPLATE =
  "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: <think>\n{% endif %}";

let h: Harness;
beforeAll(async () => {
  h = await startHarness(async (models) => {
    for (const [id, parser] of [
      ["plain", undefined],
      ["thinker", "deepseek_r1"],
    ] as const) {
      const dir = await addSyntheticModel(models, id, { id, ...(parser && { reasoning_parser: parser }) });
      writeFileSync(join(dir, "chat_template.jinja"), TEMPLATE);
    }
  });
});
afterAll(() => h?.dispose());

type Message = { content: string | null; reasoning: string | null; reasoning_content?: string | null };
type Choice = { message: Message; finish_reason: string };

const ask = (model: string, extra: Record<string, unknown> = {}) => ({
  model,
  messages: [{ role: "user", content: "Why is the sky blue?" }],
  max_tokens: 24,
  temperature: 0,
  ...extra,
});

async function message(model: string, extra: Record<string, unknown> = {}): Promise<Choice> {
  const r = await chat<{ choices: Choice[] }>(h, ask(model, extra));
  expect(r.status, r.text).toBe(200);
  return r.json!.choices[0]!;
}

describe("reasoning output", () => {
  it("splits the model's text at </think>: reasoning and reasoning_content, then the answer", async () => {
    const plain = await message("plain");
    expect(plain.message.reasoning).toBeNull();
    expect(plain.message).not.toHaveProperty("reasoning_content");
    const want = splitReasoning(plain.message.content!, true);
    const thinker = await message("thinker");
    expect(want.reasoning).not.toBeNull();
    expect(thinker.message.reasoning).toBe(want.reasoning);
    expect(thinker.message.reasoning_content).toBe(want.reasoning);
    expect(thinker.message.content).toBe(want.content);
    expect(thinker.finish_reason).toBe(plain.finish_reason);
  });

  it("include_reasoning false drops the reasoning, not the split", async () => {
    const all = await message("thinker");
    const quiet = await message("thinker", { include_reasoning: false });
    expect(quiet.message.reasoning).toBeNull();
    expect(quiet.message.reasoning_content).toBeNull();
    expect(quiet.message.content).toBe(all.message.content);
  });

  it("streams reasoning deltas under both names, joining to the plain response's split", async () => {
    const whole = await message("thinker");
    const s = await chatStream(h, ask("thinker"));
    const deltas = s.events.flatMap(
      (e) => (e.choices as { delta: Record<string, string> }[]).map((c) => c.delta) ?? [],
    );
    const join = (k: string) => deltas.map((d) => d[k] ?? "").join("");
    expect(join("reasoning")).toBe(whole.message.reasoning);
    expect(join("reasoning_content")).toBe(whole.message.reasoning);
    expect(join("content")).toBe(whole.message.content ?? "");
    const quiet = await chatStream(h, ask("thinker", { include_reasoning: false }));
    for (const e of quiet.events)
      for (const c of e.choices as { delta: Record<string, unknown> }[])
        expect(c.delta).not.toHaveProperty("reasoning");
  });

  it("the Messages API returns the same think block as a thinking block before the text", async () => {
    const whole = await message("thinker");
    const res = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "x-api-key": h.key },
      body: JSON.stringify({
        model: "thinker",
        max_tokens: 24,
        temperature: 0,
        messages: [{ role: "user", content: "Why is the sky blue?" }],
      }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { content: { type: string; thinking?: string; text?: string }[] };
    expect(body.content[0]).toEqual({ type: "thinking", thinking: whole.message.reasoning, signature: "" });
    expect(body.content.find((b) => b.type === "text")?.text ?? null).toBe(whole.message.content);
  });

  it("the Responses API returns it as a reasoning item, streamed as reasoning_text deltas, and continues it", async () => {
    const whole = await message("thinker");
    const post = (body: Record<string, unknown>) =>
      fetch(`${h.url}/v1/responses`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${h.key}` },
        body: JSON.stringify({ model: "thinker", max_output_tokens: 24, temperature: 0, ...body }),
      });
    const res = await post({ input: "Why is the sky blue?" });
    expect(res.status).toBe(200);
    const r = (await res.json()) as {
      id: string;
      output: { type: string; content?: { type: string; text: string }[] }[];
    };
    expect(r.output[0]).toMatchObject({
      type: "reasoning",
      summary: [],
      content: [{ type: "reasoning_text", text: whole.message.reasoning }],
    });
    const text = r.output.find((o) => o.type === "message")?.content?.[0]?.text ?? null;
    expect(text).toBe(whole.message.content);

    const streamed = await (await post({ input: "Why is the sky blue?", stream: true })).text();
    const events = streamed
      .split("\n\n")
      .flatMap((b) => b.split("\n").filter((l) => l.startsWith("data: ")))
      .map((l) => JSON.parse(l.slice(6)) as { type: string; delta?: string });
    const deltas = events.filter((e) => e.type === "response.reasoning_text.delta").map((e) => e.delta);
    expect(deltas.join("")).toBe(whole.message.reasoning);
    expect(events.findIndex((e) => e.type === "response.reasoning_text.done")).toBeGreaterThan(0);

    // The stored reasoning item goes back to the template with the next turn.
    const next = await post({ input: "And at sunset?", previous_response_id: r.id });
    expect(next.status).toBe(200);
  });

  it("a JSON schema binds the answer after the think block: never text outside the schema", async () => {
    const schema = DIGIT_ANSWER_SCHEMA;
    for (const max_tokens of [4, 24, 64]) {
      const c = await message("thinker", {
        max_tokens,
        temperature: 1,
        seed: max_tokens,
        response_format: { type: "json_schema", json_schema: { name: "n", schema } },
      });
      // Ending inside the think block is a length finish with no answer; an answer is always valid.
      if (c.message.content === null) expect(c.finish_reason).toBe("length");
      else expect(isDigitAnswer(JSON.parse(c.message.content)), c.message.content).toBe(true);
      expect(typeof c.message.reasoning).toBe("string");
    }
  });
});
