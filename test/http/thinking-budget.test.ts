/**
 * Thinking budgets and reasoning token counts over HTTP, on the real SmolLM2 weights served twice
 * from a temporary models directory: as themselves (no reasoning parser) and as "thinker", with
 * `reasoning_parser: deepseek_r1` and a template that opens a think block and shows past reasoning
 * the way Qwen3's does (`</think>` then a blank line). Closing tags are pushed away with logit_bias
 * where a test needs the model to think on, so only the budget can end the block.
 */
import { mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadTransformersTokenizer } from "../../src/core/runner/tokenizer.ts";
import { DIGIT_ANSWER_SCHEMA, isDigitAnswer } from "../fixtures/digit-answer.ts";
import { hasModel, MODEL_DIR } from "../runner/model-fixture.ts";
import { chat, type Harness, startHarness } from "./harness.ts";

const TEMPLATE =
  "{% for m in messages %}{{ m.role }}: " +
  "{% if m.role == 'assistant' and m.reasoning_content %}<think>\n{{ m.reasoning_content }}\n</think>\n\n{% endif %}" +
  "{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: <think>\n{% endif %}";
const CLOSE = "</think>\n\n";

type Usage = { completion_tokens: number; completion_tokens_details?: { reasoning_tokens: number } };
type Choice = {
  message: { content: string | null; reasoning: string | null };
  finish_reason: string;
  token_ids: number[];
};
type Completion = { choices: Choice[]; usage: Usage };

describe.skipIf(!hasModel("q4"))("thinking budgets and reasoning tokens over HTTP", () => {
  let h: Harness;
  let encode: (text: string) => number[];
  let decode: (ids: number[]) => string;
  let noClose: Record<string, number>;
  beforeAll(async () => {
    h = await startHarness(
      (models) => {
        for (const [id, settings] of [
          ["plain", {}],
          ["thinker", { reasoning_parser: "deepseek_r1", tool_parser: "hermes" }],
          ["budgeted", { reasoning_parser: "deepseek_r1", thinking_token_budget: 3 }],
        ] as const) {
          const dir = join(models, id);
          mkdirSync(dir);
          for (const f of readdirSync(MODEL_DIR))
            if (f !== "ortserve.json") symlinkSync(join(MODEL_DIR, f), join(dir, f));
          writeFileSync(join(dir, "ortserve.json"), JSON.stringify({ id, format: "q4", ...settings }));
          writeFileSync(join(dir, "chat_template.jinja"), TEMPLATE);
        }
      },
      { maxModelLen: 2048 },
    );
    const tok = await loadTransformersTokenizer(MODEL_DIR);
    encode = (text) => tok.encode(text, { add_special_tokens: false });
    decode = (ids) => tok.decode(ids, { skip_special_tokens: false });
    noClose = {};
    for (let id = 0; id < 49152; id++) if (decode([id]).trimStart().startsWith("</")) noClose[id] = -100;
  }, 120_000);
  afterAll(() => h?.dispose());

  const ask = (model: string, extra: Record<string, unknown> = {}) => ({
    model,
    messages: [{ role: "user", content: "Why is the sky blue? Think step by step." }],
    max_tokens: 24,
    temperature: 0,
    return_token_ids: true,
    ...extra,
  });
  async function complete(model: string, extra: Record<string, unknown> = {}): Promise<Completion> {
    const r = await chat<Completion>(h, ask(model, extra));
    expect(r.status, r.text).toBe(200);
    return r.json!;
  }
  /** Tokens up to the one that completes `</think>` (all of them when the block never closed). */
  const blockTokens = (ids: number[]) => {
    for (let k = 1; k <= ids.length; k++) if (decode(ids.slice(0, k)).includes("</think>")) return k;
    return ids.length;
  };

  it("usage counts the think block's tokens: 0 without a reasoning parser, on chat and Responses", async () => {
    const plain = await complete("plain");
    expect(plain.usage.completion_tokens_details).toEqual({ reasoning_tokens: 0 });
    const thinker = await complete("thinker", { max_tokens: 40 });
    const ids = thinker.choices[0]!.token_ids;
    expect(thinker.usage.completion_tokens_details).toEqual({ reasoning_tokens: blockTokens(ids) });

    const res = await fetch(`${h.url}/v1/responses`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${h.key}` },
      body: JSON.stringify({
        model: "thinker",
        input: "Why is the sky blue? Think step by step.",
        max_output_tokens: 40,
        temperature: 0,
        store: false,
      }),
    });
    expect(res.status).toBe(200);
    const r = (await res.json()) as { usage: { output_tokens_details: { reasoning_tokens: number } } };
    expect(r.usage.output_tokens_details.reasoning_tokens).toBe(blockTokens(ids));
  });

  it("a model's own thinking_token_budget holds requests without one, on chat and Responses; a request's wins", async () => {
    const closeIds = encode(CLOSE);
    for (const [extra, n] of [
      [{}, 3],
      [{ thinking_token_budget: 6 }, 6],
    ] as const) {
      const c = await complete("budgeted", { logit_bias: noClose, max_tokens: 32, ...extra });
      const ids = c.choices[0]!.token_ids;
      expect(ids.slice(n, n + closeIds.length)).toEqual(closeIds);
      expect(c.usage.completion_tokens_details!.reasoning_tokens).toBe(blockTokens(ids));
      expect(c.choices[0]!.message.content).not.toBeNull();
    }
    // Responses has no budget field: the model's holds it (its own close may come sooner).
    const res = await fetch(`${h.url}/v1/responses`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${h.key}` },
      body: JSON.stringify({
        model: "budgeted",
        input: "Why is the sky blue?",
        max_output_tokens: 32,
        store: false,
      }),
    });
    expect(res.status).toBe(200);
    const r = (await res.json()) as { usage: { output_tokens_details: { reasoning_tokens: number } } };
    expect(r.usage.output_tokens_details.reasoning_tokens).toBeLessThanOrEqual(3 + closeIds.length);
  });

  it("thinking_token_budget: N tokens of the model's own reasoning, then the template's close, then the answer", async () => {
    const free = await complete("thinker", { logit_bias: noClose });
    const freeIds = free.choices[0]!.token_ids;
    expect(free.choices[0]!.message.content).toBeNull();
    const closeIds = encode(CLOSE);
    const n = 5;
    const c = await complete("thinker", { logit_bias: noClose, thinking_token_budget: n });
    const ids = c.choices[0]!.token_ids;
    expect(ids.slice(0, n)).toEqual(freeIds.slice(0, n));
    // The close as the template writes it (</think> and a blank line), as the tokenizer spells it.
    expect(ids.slice(n, n + closeIds.length)).toEqual(closeIds);
    expect(c.choices[0]!.message.reasoning).toBe(decode(freeIds.slice(0, n)));
    expect(c.choices[0]!.message.content).not.toBeNull();
    expect(c.usage.completion_tokens_details!.reasoning_tokens).toBe(blockTokens(ids));
  });

  it("a budget of 1024 holds the model to 1024 tokens of reasoning, and the answer follows", async () => {
    const c = await complete("thinker", {
      logit_bias: noClose,
      // The model's end-of-turn token would end it first.
      ignore_eos: true,
      thinking_token_budget: 1024,
      max_tokens: 1040,
    });
    const ids = c.choices[0]!.token_ids;
    expect(ids.length, JSON.stringify(c.choices[0])).toBe(1040);
    expect(decode(ids.slice(0, 1024))).not.toContain("</think>");
    expect(ids.slice(1024, 1024 + encode(CLOSE).length)).toEqual(encode(CLOSE));
    expect(c.choices[0]!.message.content).not.toBeNull();
    expect(c.usage.completion_tokens_details!.reasoning_tokens).toBe(blockTokens(ids));
  }, 300_000);

  it("a JSON schema still binds the answer after a forced close", async () => {
    const schema = DIGIT_ANSWER_SCHEMA;
    for (const seed of [1, 2, 3]) {
      const c = await complete("thinker", {
        logit_bias: noClose,
        thinking_token_budget: 4,
        max_tokens: 48,
        temperature: 1,
        seed,
        response_format: { type: "json_schema", json_schema: { name: "n", schema } },
      });
      const m = c.choices[0]!;
      expect(m.finish_reason, JSON.stringify(m.message)).toBe("stop");
      expect(isDigitAnswer(JSON.parse(m.message.content!)), m.message.content!).toBe(true);
    }
  });

  it("a required tool call still binds the answer after a forced close; a stream's usage counts the block", async () => {
    const tools = [
      {
        type: "function",
        function: {
          name: "get_weather",
          parameters: {
            type: "object",
            properties: { city: { enum: ["Paris", "Rome"] } },
            required: ["city"],
          },
        },
      },
    ];
    const c = await complete("thinker", {
      logit_bias: noClose,
      thinking_token_budget: 3,
      max_tokens: 64,
      tools,
      tool_choice: "required",
    });
    const m = c.choices[0]!.message as Choice["message"] & {
      tool_calls: { function: { name: string; arguments: string } }[];
    };
    expect(m.tool_calls.length, decode(c.choices[0]!.token_ids)).toBe(1);
    expect(m.tool_calls[0]!.function.name).toBe("get_weather");
    expect(["Paris", "Rome"]).toContain(JSON.parse(m.tool_calls[0]!.function.arguments).city);

    const whole = await complete("thinker", { logit_bias: noClose, thinking_token_budget: 5 });
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${h.key}` },
      body: JSON.stringify(
        ask("thinker", {
          logit_bias: noClose,
          thinking_token_budget: 5,
          stream: true,
          stream_options: { include_usage: true },
        }),
      ),
    });
    const chunks = (await res.text())
      .split("\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)) as { usage?: Usage });
    expect(chunks.at(-1)!.usage!.completion_tokens_details).toEqual(whole.usage.completion_tokens_details);
  });

  it("a budget on a model without a reasoning parser is a 400 naming the field", async () => {
    const r = await chat<{ error: { param: string; message: string } }>(
      h,
      ask("plain", { thinking_token_budget: 8 }),
    );
    expect(r.status).toBe(400);
    expect(r.json!.error.param).toBe("thinking_token_budget");
    const neg = await chat<{ error: { param: string } }>(h, ask("thinker", { thinking_token_budget: -1 }));
    expect(neg.status).toBe(400);
    expect(neg.json!.error.param).toBe("thinking_token_budget");
  });

  it("Messages: thinking enabled holds the model to budget_tokens; on a model without a parser it is a 400 naming thinking", async () => {
    const post = (body: Record<string, unknown>) =>
      fetch(`${h.url}/v1/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "x-api-key": h.key },
        body: JSON.stringify({
          max_tokens: 1100,
          temperature: 0,
          messages: [{ role: "user", content: "Why is the sky blue?" }],
          thinking: { type: "enabled", budget_tokens: 1024 },
          stop_sequences: ["."],
          ...body,
        }),
      });
    const ok = await post({ model: "thinker" });
    expect(ok.status).toBe(200);
    const body = (await ok.json()) as { content: { type: string }[]; stop_reason: string };
    expect(body.content[0]!.type).toBe("thinking");
    expect(body.stop_reason).toBe("stop_sequence");
    const refused = await post({ model: "plain" });
    expect(refused.status).toBe(400);
    const err = (await refused.json()) as { type: string; error: { type: string; message: string } };
    expect(err.type).toBe("error");
    expect(err.error.message).toMatch(/^thinking is not supported/);
  });
});
