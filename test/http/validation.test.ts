/**
 * Every request field of the service spec over HTTP, table-driven: at least one accepted edge value
 * (200, the request really runs on the synthetic model) and one rejected value (400 whose
 * error.param names the field, or its path inside the field). Fields whose feature the engine does
 * not have are 400s naming the field, never ignored. Cross-field rules and the checks that need the
 * model (vocabulary, context, scheduling policy) are covered the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatCompletionRequestSchema } from "../../src/protocol/chat-request.ts";
import {
  addSyntheticModel,
  CONTEXT,
  chat,
  expectApiError,
  type Harness,
  type Reply,
  SPEC_REQUEST_FIELDS,
  startHarness,
  tinyRequest,
} from "./harness.ts";

/** The synthetic vocabulary: 3 specials, 256 bytes, 10 merges. */
const VOCAB = 269;
const INT64_MAX = "9223372036854775807";
const INT64_MIN = "-9223372036854775808";

let h: Harness;
/** Prompt tokens of tinyRequest() on the synthetic model. */
let promptTokens: number;

beforeAll(async () => {
  h = await startHarness(
    async (models) => {
      await addSyntheticModel(models, "tiny");
      await addSyntheticModel(models, "prio", { scheduling_policy: "priority" });
      // The chat_template cases render request templates, which the operator must allow.
    },
    { trustRequestChatTemplate: true },
  );
  const r = await chat<{ usage: { prompt_tokens: number } }>(h, tinyRequest());
  expect(r.status, r.text).toBe(200);
  promptTokens = r.json.usage.prompt_tokens;
  expect(promptTokens).toBeGreaterThan(5);
});

afterAll(async () => {
  await h?.dispose();
});

// ---- the table ----

/** A JSON literal written into the body as is (integers JSON.parse would round). */
const RAW = Symbol("raw");
const raw = (text: string) => ({ [RAW]: text });
const isRaw = (v: unknown): v is { [RAW]: string } => typeof v === "object" && v !== null && RAW in v;

interface Accept {
  value: unknown;
  /** Other fields sent with it. */
  with?: Record<string, unknown>;
  /** Extra checks on the 200 response (JSON, or the SSE text when streaming). */
  check?: (r: Reply) => void;
  label?: string;
}

interface Reject {
  value: unknown;
  with?: Record<string, unknown>;
  /** The expected error.param; default: the field itself. */
  param?: string;
  code?: string;
  message?: RegExp;
  label?: string;
  /** A known server bug makes this case fail today; the test flips once it is fixed. */
  knownBug?: string;
}

interface FieldCase {
  field: string;
  ok: Accept[];
  bad: Reject[];
}

/** Computed once the prompt length is known. */
const lazy = <T>(fn: () => T) => ({ [LAZY]: fn });
const LAZY = Symbol("lazy");
const resolve = (v: unknown): unknown =>
  typeof v === "object" && v !== null && LAZY in v ? (v as { [LAZY]: () => unknown })[LAZY]() : v;

const tool = {
  type: "function",
  function: { name: "get_weather", description: "Weather", parameters: { type: "object", properties: {} } },
};
const TEMPLATE = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:";
const prefill = {
  messages: [
    { role: "user", content: "hi" },
    { role: "assistant", content: "Hel" },
  ],
  add_generation_prompt: false,
};

type Json = Record<string, unknown>;
const usageOf = (r: Reply) =>
  (r.json as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
const choice0 = (r: Reply) => (r.json as { choices: Json[] }).choices[0]!;

const cases: FieldCase[] = [
  {
    field: "messages",
    ok: [
      {
        value: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "hi" },
        ],
      },
      {
        value: [
          { role: "developer", content: "Be brief." },
          { role: "user", content: [{ type: "text", text: "hi" }], name: "ann" },
        ],
      },
      {
        value: [
          { role: "user", content: "hi" },
          { role: "assistant", content: "hello" },
          { role: "user", content: "again" },
        ],
      },
    ],
    bad: [
      { value: [] },
      { value: "hi" },
      { value: [{ role: "user" }], param: "messages[0].content" },
      { value: [{ content: "hi" }], param: "messages[0].role" },
      {
        value: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://x/y.png" } }] }],
        param: "messages[0].content[0].type",
        code: "unsupported_parameter",
      },
    ],
  },
  {
    field: "model",
    ok: [{ value: "tiny" }, { value: "prio" }],
    bad: [{ value: null, code: "invalid_type" }, { value: 5 }, { value: ["tiny"] }],
  },
  {
    field: "frequency_penalty",
    ok: [{ value: -2 }, { value: 2 }, { value: null }],
    bad: [{ value: 2.01 }, { value: -2.01 }, { value: "1" }],
  },
  {
    field: "presence_penalty",
    ok: [{ value: -2 }, { value: 2 }],
    bad: [{ value: -2.5 }, { value: true }],
  },
  {
    field: "logit_bias",
    ok: [{ value: { "0": -100, [VOCAB - 1]: 100 } }, { value: { "5": 1e9 } }, { value: {} }],
    bad: [
      {
        value: { [VOCAB]: 1 },
        message: new RegExp(`\\b${VOCAB}\\b`),
        label: "the first id past the vocabulary",
      },
      { value: { "-1": 1 } },
      { value: { abc: 1 } },
      { value: { "5": "x" }, param: "logit_bias.5" },
      { value: [1] },
    ],
  },
  {
    field: "logprobs",
    ok: [{ value: true }, { value: false }, { value: null }],
    bad: [{ value: 1 }, { value: "true" }],
  },
  {
    field: "top_logprobs",
    ok: [
      { value: 0, with: { logprobs: true } },
      {
        value: 20,
        with: { logprobs: true },
        check: (r) =>
          expect(
            (choice0(r).logprobs as { content: { top_logprobs: unknown[] }[] }).content[0]!.top_logprobs,
          ).toHaveLength(20),
      },
    ],
    bad: [
      { value: 21, with: { logprobs: true }, label: "one past the server's max logprobs" },
      { value: -1, with: { logprobs: true }, label: "-1 (the whole vocabulary)" },
      { value: 1, label: "without logprobs" },
      { value: 1, with: { logprobs: false }, label: "with logprobs false" },
      { value: 1.5, with: { logprobs: true } },
    ],
  },
  {
    field: "max_tokens",
    ok: [
      { value: 1, check: (r) => expect(usageOf(r).completion_tokens).toBe(1) },
      {
        value: lazy(() => CONTEXT - promptTokens),
        with: { temperature: 0, max_tokens: undefined },
        label: "exactly what the context leaves",
      },
      { value: null, with: { max_completion_tokens: 1 } },
    ],
    bad: [
      { value: 0 },
      { value: -1 },
      { value: 1.5 },
      { value: "10" },
      {
        value: lazy(() => CONTEXT - promptTokens + 1),
        message: new RegExp(`${CONTEXT}.*${CONTEXT + 1}`),
        label: "one token beyond the context",
      },
    ],
  },
  {
    field: "max_completion_tokens",
    ok: [
      {
        value: 2,
        // Sampled at temperature 1, the tiny model ends with EOS now and then (~0.5% a token).
        with: { ignore_eos: true },
        check: (r) => expect(usageOf(r).completion_tokens).toBe(2),
        label: "wins over max_tokens",
      },
      { value: null },
    ],
    bad: [
      { value: 0 },
      { value: 2.5 },
      {
        value: lazy(() => CONTEXT - promptTokens + 1),
        message: new RegExp(`${CONTEXT}`),
        label: "one token beyond the context",
        knownBug: "the engine's context error always names max_tokens",
      },
    ],
  },
  {
    field: "n",
    ok: [
      { value: 1 },
      {
        value: 4,
        with: { temperature: 1 },
        check: (r) => expect((r.json as { choices: unknown[] }).choices).toHaveLength(4),
        label: "max_num_seqs",
      },
    ],
    bad: [
      { value: 0 },
      { value: 5, with: { temperature: 1 }, label: "beyond max_num_seqs" },
      { value: 2, with: { temperature: 0 }, label: "greedy" },
      { value: 1.5 },
    ],
  },
  {
    field: "response_format",
    ok: [
      { value: { type: "text" } },
      { value: null },
      { value: { type: "json_object" } },
      {
        value: { type: "json_schema", json_schema: { name: "x", schema: { type: "object" }, strict: true } },
      },
    ],
    bad: [
      {
        value: {
          type: "json_schema",
          json_schema: { name: "x", schema: { type: "array", contains: { type: "integer" } } },
        },
        param: "response_format.json_schema.schema",
        label: "contains",
      },
      { value: { type: "json_schema" }, param: "response_format.json_schema" },
      { value: { type: "xml" }, param: "response_format.type" },
    ],
  },
  {
    field: "seed",
    ok: [
      { value: raw(INT64_MAX), with: { temperature: 1 }, label: "int64 max" },
      { value: raw(INT64_MIN), with: { temperature: 1 }, label: "int64 min" },
      { value: -1 },
      { value: 0 },
      { value: null },
    ],
    bad: [
      { value: raw("9223372036854775808"), label: "int64 max + 1" },
      { value: raw("-9223372036854775809"), label: "int64 min - 1" },
      { value: raw("1e19") },
      { value: 1.5 },
      { value: "1" },
    ],
  },
  {
    field: "stop",
    ok: [{ value: "x" }, { value: ["a", "b"] }, { value: [] }, { value: null }],
    bad: [{ value: "" }, { value: ["a", ""] }, { value: [1], param: "stop[0]" }, { value: 5 }],
  },
  {
    field: "stream",
    ok: [
      { value: true, check: (r) => expect(r.text.endsWith("data: [DONE]\n\n")).toBe(true) },
      { value: false },
      { value: null },
    ],
    bad: [{ value: "yes" }, { value: 1 }],
  },
  {
    field: "stream_options",
    ok: [
      { value: { include_usage: true, continuous_usage_stats: true }, with: { stream: true } },
      { value: null, label: "null without stream" },
    ],
    bad: [
      { value: { include_usage: true }, label: "without stream" },
      { value: { include_usage: true }, with: { stream: false }, label: "with stream false" },
      { value: { foo: true }, with: { stream: true }, param: "stream_options.foo" },
    ],
  },
  {
    field: "temperature",
    ok: [{ value: 0 }, { value: 2 }, { value: 1e-9 }, { value: null }],
    bad: [{ value: -0.1 }, { value: 2.01 }, { value: "hot" }],
  },
  {
    field: "top_p",
    ok: [{ value: 1e-9, with: { temperature: 1 } }, { value: 1 }],
    bad: [{ value: 0 }, { value: 1.01 }],
  },
  {
    field: "tools",
    ok: [{ value: [tool] }, { value: null }],
    bad: [
      { value: [] },
      { value: [{ type: "other", function: { name: "f" } }], param: "tools[0].type" },
      { value: [{ type: "function", function: {} }], param: "tools[0].function.name" },
    ],
  },
  {
    field: "tool_choice",
    ok: [{ value: "none", with: { tools: [tool] } }, { value: null }],
    // "auto" needs a model with a tool parser (this one has none); "required" needs tools.
    bad: [
      { value: "auto", with: { tools: [tool] } },
      { value: "required" },
      { value: { type: "function" }, param: "tool_choice.function" },
    ],
  },
  {
    field: "reasoning_effort",
    ok: [{ value: "low" }, { value: "high" }, { value: null }],
    bad: [{ value: "max" }, { value: 1 }],
  },
  {
    field: "include_reasoning",
    ok: [{ value: false }, { value: true }],
    bad: [{ value: null }, { value: "no" }],
  },
  {
    field: "thinking_token_budget",
    ok: [{ value: null }],
    // A budget needs a think block: this model has no reasoning parser.
    bad: [
      { value: 8, label: "a budget on a model without a reasoning parser" },
      { value: -1 },
      { value: 1.5 },
    ],
  },
  {
    field: "parallel_tool_calls",
    ok: [{ value: false }, { value: null }],
    bad: [{ value: 0 }],
  },
  {
    field: "user",
    ok: [{ value: "user-1234" }, { value: null }],
    bad: [{ value: 1 }],
  },
  {
    field: "use_beam_search",
    ok: [
      { value: false },
      {
        value: true,
        with: { n: 2, temperature: 0, max_tokens: 2 },
        check: (r) => expect((r.json as { choices: unknown[] }).choices).toHaveLength(2),
        label: "true with n=2 beams",
      },
    ],
    bad: [{ value: null }, { value: 1 }],
  },
  {
    field: "top_k",
    ok: [{ value: -1 }, { value: 0 }, { value: 1, with: { temperature: 1 } }],
    bad: [{ value: -2 }, { value: 1.5 }],
  },
  {
    field: "min_p",
    ok: [{ value: 0 }, { value: 1, with: { temperature: 1 } }],
    bad: [{ value: 1.1 }, { value: -0.1 }],
  },
  {
    field: "repetition_penalty",
    ok: [{ value: 0.01 }, { value: 2 }],
    bad: [{ value: 0 }, { value: -1 }],
  },
  {
    field: "length_penalty",
    ok: [{ value: 0 }, { value: 2.5 }],
    bad: [{ value: null }, { value: "x" }],
  },
  {
    field: "stop_token_ids",
    ok: [{ value: [2] }, { value: [0, VOCAB - 1] }, { value: [] }, { value: null }],
    bad: [
      { value: [VOCAB], message: new RegExp(`\\b${VOCAB}\\b`) },
      { value: [-1] },
      { value: [1.5], param: "stop_token_ids[0]" },
      { value: "1" },
    ],
  },
  {
    field: "include_stop_str_in_output",
    ok: [{ value: true }],
    bad: [{ value: null }],
  },
  {
    field: "ignore_eos",
    ok: [
      {
        value: true,
        with: { max_tokens: 3 },
        check: (r) => expect(usageOf(r).completion_tokens).toBe(3),
      },
    ],
    bad: [{ value: "x" }],
  },
  {
    field: "min_tokens",
    ok: [{ value: 0 }, { value: 1, label: "equal to max_tokens" }],
    bad: [{ value: 2, label: "above max_tokens" }, { value: -1 }, { value: null }],
  },
  {
    field: "skip_special_tokens",
    ok: [{ value: false }],
    bad: [{ value: null }],
  },
  {
    field: "spaces_between_special_tokens",
    ok: [{ value: false }],
    bad: [{ value: 1 }],
  },
  {
    field: "truncate_prompt_tokens",
    ok: [
      { value: -1, check: (r) => expect(usageOf(r).prompt_tokens).toBe(promptTokens) },
      { value: 5, check: (r) => expect(usageOf(r).prompt_tokens).toBe(5), label: "keeps the last 5" },
      { value: 1, check: (r) => expect(usageOf(r).prompt_tokens).toBe(1) },
      {
        value: lazy(() => CONTEXT - 1),
        check: (r) => expect(usageOf(r).prompt_tokens).toBe(promptTokens),
        label: "the largest that leaves room for max_tokens",
      },
      { value: null },
    ],
    bad: [
      { value: -2 },
      { value: 0, label: "0 keeps no prompt" },
      { value: lazy(() => CONTEXT), label: "no room left for max_tokens" },
      { value: raw(INT64_MAX), label: "int64 max (beyond the context)" },
      { value: raw("9223372036854775808"), label: "int64 max + 1" },
      { value: 1.5 },
    ],
  },
  {
    field: "prompt_logprobs",
    ok: [
      { value: 0 },
      {
        value: 20,
        check: (r) =>
          expect((r.json as { prompt_logprobs: unknown[] }).prompt_logprobs).toHaveLength(promptTokens),
      },
      { value: 0, with: { stream: true }, label: "0 with stream" },
    ],
    bad: [
      { value: 21 },
      { value: -1, label: "-1 (the whole vocabulary)" },
      { value: -2 },
      { value: 1, with: { stream: true }, label: "with stream" },
    ],
  },
  {
    field: "allowed_token_ids",
    ok: [
      {
        value: [65],
        with: { return_token_ids: true, max_tokens: 2 },
        check: (r) => expect(choice0(r).token_ids).toEqual([65, 65]),
      },
      { value: [0, VOCAB - 1] },
    ],
    bad: [{ value: [] }, { value: [VOCAB] }, { value: [1.5], param: "allowed_token_ids[0]" }],
  },
  {
    field: "bad_words",
    ok: [{ value: ["the"] }, { value: [] }],
    bad: [{ value: [""], param: "bad_words[0]" }, { value: null }, { value: "x" }],
  },
  {
    field: "echo",
    ok: [{ value: true }, { value: true, with: { ...prefill, continue_final_message: true } }],
    bad: [{ value: null }],
  },
  {
    field: "add_generation_prompt",
    ok: [{ value: false }, { value: true }],
    bad: [{ value: null }, { value: "yes" }],
  },
  {
    field: "continue_final_message",
    ok: [{ value: true, with: prefill }, { value: false }],
    bad: [
      { value: true, with: { messages: prefill.messages }, label: "with the default add_generation_prompt" },
      { value: true, with: { ...prefill, add_generation_prompt: true } },
      { value: "yes" },
    ],
  },
  {
    field: "add_special_tokens",
    ok: [{ value: true }, { value: false }],
    bad: [{ value: null }],
  },
  {
    field: "documents",
    ok: [{ value: [{ title: "A", text: "B" }] }, { value: [] }, { value: null }],
    bad: [{ value: [1], param: "documents[0]" }, { value: {} }],
  },
  {
    field: "chat_template",
    ok: [{ value: TEMPLATE }, { value: null }],
    bad: [{ value: 1 }, { value: "{% for m in messages %}", label: "a template that does not parse" }],
  },
  {
    field: "chat_template_kwargs",
    ok: [{ value: { custom_flag: true } }, { value: {} }, { value: null }],
    bad: [{ value: "x" }, { value: [] }, { value: { tokenize: true } }],
  },
  {
    field: "mm_processor_kwargs",
    ok: [{ value: null }],
    bad: [
      { value: {}, code: "unsupported_parameter" },
      { value: { num_crops: 4 }, code: "unsupported_parameter" },
    ],
  },
  {
    field: "structured_outputs",
    ok: [
      { value: null },
      { value: { regex: "[a-z]+" } },
      { value: { json: { type: "object", properties: { a: { type: "integer" } } } } },
      { value: { choice: ["yes", "no"] } },
      { value: { grammar: 'root ::= "a"+' } },
      { value: { json_object: true, disable_any_whitespace: true } },
    ],
    bad: [
      {
        value: { json: { type: "integer", not: { const: 1 } } },
        param: "structured_outputs.json",
        label: "not",
      },
      { value: { regex: "(?=a)a" }, param: "structured_outputs.regex", label: "lookahead" },
      {
        value: { grammar: "root ::= missing" },
        param: "structured_outputs.grammar",
        label: "undefined rule",
      },
      { value: { regex: "a", _backend: "outlines" }, param: "structured_outputs._backend" },
      { value: {}, label: "no constraint" },
      { value: { regex: "a", grammar: "b" }, label: "two constraints" },
      { value: { regex: 5 }, param: "structured_outputs.regex" },
    ],
  },
  {
    field: "priority",
    ok: [
      { value: 0 },
      { value: -3, with: { model: "prio" }, label: "-3 on a priority-scheduled model" },
      { value: 5, with: { model: "prio" }, label: "5 on a priority-scheduled model" },
    ],
    bad: [
      { value: 1, code: "priority_not_supported", label: "1 on an fcfs model" },
      { value: -1, code: "priority_not_supported", label: "-1 on an fcfs model" },
      { value: 1.5 },
      { value: null },
    ],
  },
  {
    field: "request_id",
    ok: [
      {
        value: "my-request-1",
        check: (r) => expect((r.json as { id: string }).id).toBe("chatcmpl-my-request-1"),
      },
    ],
    bad: [{ value: 1 }, { value: null }],
  },
  {
    field: "return_tokens_as_token_ids",
    ok: [
      {
        value: true,
        with: { logprobs: true, top_logprobs: 2 },
        check: (r) => {
          const entry = (
            choice0(r).logprobs as { content: { token: string; top_logprobs: { token: string }[] }[] }
          ).content[0]!;
          expect(entry.token).toMatch(/^token_id:\d+$/);
          for (const t of entry.top_logprobs) expect(t.token).toMatch(/^token_id:\d+$/);
        },
      },
      { value: null },
    ],
    bad: [{ value: "x" }],
  },
  {
    field: "return_token_ids",
    ok: [
      {
        value: true,
        check: (r) =>
          expect((r.json as { prompt_token_ids: number[] }).prompt_token_ids).toHaveLength(promptTokens),
      },
      { value: false },
    ],
    bad: [{ value: 1 }],
  },
  {
    field: "cache_salt",
    ok: [{ value: "s".repeat(128) }, { value: "base64+salt=" }, { value: null }],
    bad: [{ value: "" }, { value: "s".repeat(129) }, { value: "a/b" }, { value: 5 }],
  },
  {
    field: "kv_transfer_params",
    ok: [
      {
        value: { do_remote_decode: true, n: [1, 2] },
        check: (r) =>
          expect((r.json as Json).kv_transfer_params).toEqual({ do_remote_decode: true, n: [1, 2] }),
      },
      { value: null },
    ],
    bad: [{ value: [1] }, { value: "x" }],
  },
  {
    field: "engine_xargs",
    ok: [{ value: {} }, { value: null }],
    bad: [{ value: { any_key: 1 }, param: "engine_xargs.any_key" }, { value: [1] }],
  },
  {
    field: "repetition_detection",
    ok: [
      { value: { max_pattern_size: 2, min_pattern_size: 1, min_count: 2 } },
      { value: { max_pattern_size: 0 } },
      { value: null },
    ],
    bad: [
      { value: { max_pattern_size: 2, min_count: 1 }, param: "repetition_detection.min_count" },
      { value: { max_pattern_size: -1 }, param: "repetition_detection.max_pattern_size" },
      { value: { foo: 1 }, param: "repetition_detection.foo" },
    ],
  },
];

// ---- running the table ----

function bodyText(field: string, value: unknown, extra: Record<string, unknown> = {}): string {
  const v = resolve(value);
  const placeholder = "\u0000raw\u0000";
  const body: Record<string, unknown> = { ...tinyRequest(), ...extra, [field]: isRaw(v) ? placeholder : v };
  for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
  const text = JSON.stringify(body);
  return isRaw(v) ? text.replace(JSON.stringify(placeholder), v[RAW]) : text;
}

const show = (v: unknown): string => {
  if (typeof v === "object" && v !== null && LAZY in v) return "(computed)";
  if (isRaw(v)) return v[RAW];
  const s = JSON.stringify(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
};

describe("the table covers the spec", () => {
  it("has a case for every request field of the spec, and the server knows exactly those fields", () => {
    const properties = Object.keys(
      (chatCompletionRequestSchema.jsonSchema() as { properties: Record<string, unknown> }).properties,
    );
    expect(cases.map((c) => c.field)).toEqual([...SPEC_REQUEST_FIELDS]);
    expect(properties.sort()).toEqual([...SPEC_REQUEST_FIELDS].sort());
    for (const c of cases) {
      expect(c.ok.length, c.field).toBeGreaterThan(0);
      expect(c.bad.length, c.field).toBeGreaterThan(0);
    }
  });
});

describe("every field over HTTP", () => {
  for (const c of cases) {
    describe(c.field, () => {
      for (const a of c.ok)
        it(`accepts ${a.label ?? show(a.value)}${a.with && !a.label ? ` with ${show(a.with)}` : ""}`, async () => {
          const r = await chat(h, bodyText(c.field, a.value, a.with));
          expect(r.status, r.text).toBe(200);
          a.check?.(r);
        });
      for (const b of c.bad)
        it(`rejects ${b.label ?? show(b.value)} naming ${b.param ?? c.field}`, async () => {
          const r = await chat(h, bodyText(c.field, b.value, b.with));
          const e = expectApiError(r, 400, { param: b.param ?? c.field, type: "invalid_request_error" });
          if (b.code) expect(e.code).toBe(b.code);
          if (b.message) expect(e.message).toMatch(b.message);
        });
    });
  }

  it("a request without messages or model is a 400 naming the missing field", async () => {
    expectApiError(await chat(h, { model: "tiny" }), 400, {
      param: "messages",
      code: "missing_required_parameter",
    });
    expectApiError(await chat(h, { messages: [{ role: "user", content: "hi" }] }), 400, {
      param: "model",
      code: "missing_required_parameter",
    });
  });
});

describe("limits that need the model", () => {
  it("max_tokens beyond the context: the message carries the context, prompt and requested numbers", async () => {
    const over = CONTEXT - promptTokens + 10;
    const r = await chat(h, tinyRequest({ max_tokens: over }));
    const e = expectApiError(r, 400, { param: "max_tokens" });
    expect(e.message).toContain(String(CONTEXT));
    expect(e.message).toContain(String(promptTokens));
    expect(e.message).toContain(String(over));
    expect(e.message).toContain(String(promptTokens + over));
  });

  it("a prompt longer than the context is a 400 naming messages", async () => {
    const long = "the ".repeat(CONTEXT);
    const r = await chat(h, { model: "tiny", messages: [{ role: "user", content: long }] });
    const e = expectApiError(r, 400, { param: "messages" });
    expect(e.message).toContain(String(CONTEXT));
  });

  it("a long prompt fits with truncate_prompt_tokens -1", async () => {
    const long = "the ".repeat(CONTEXT);
    const r = await chat(
      h,
      tinyRequest({ messages: [{ role: "user", content: long }], truncate_prompt_tokens: -1 }),
    );
    expect(r.status, r.text).toBe(200);
    expect(usageOf(r).prompt_tokens).toBe(CONTEXT - 1);
  });

  it("priority: a queue of mixed priorities on the priority model all complete", async () => {
    const rs = await Promise.all(
      [3, -2, 0, 7, -9].map((priority) => chat(h, tinyRequest({ priority, max_tokens: 2 }, "prio"))),
    );
    for (const r of rs) expect(r.status, r.text).toBe(200);
  });

  it("the 400 for a non-zero priority on an fcfs model is a plain JSON error when streaming too", async () => {
    const r = await chat(h, tinyRequest({ priority: 2, stream: true }));
    expectApiError(r, 400, { param: "priority", code: "priority_not_supported" });
  });
});
