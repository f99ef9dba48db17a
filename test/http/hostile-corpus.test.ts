/**
 * A hand-written hostile corpus over real HTTP with a real key: deep nesting, huge strings,
 * non-finite and out-of-range numbers, duplicate keys, wrong types in every field, invalid UTF-8
 * and lone surrogates, huge n / max_tokens / top_logprobs / logit_bias, hostile stop strings,
 * templates that loop or raise, prompts at the context limit and one past it. Every answer is a
 * clean 4xx with an OpenAI error body (or a 200 where the request is valid), never a 5xx, never a
 * hang, and the server is healthy afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH } from "../../src/http/json-body.ts";
import { SERVER_DEFAULTS } from "../../src/server.ts";
import {
  addSyntheticModel,
  CONTEXT,
  get,
  type Harness,
  type Reply,
  reply,
  SPEC_REQUEST_FIELDS,
  startHarness,
  tinyRequest,
} from "./harness.ts";

let h: Harness;

beforeAll(async () => {
  h = await startHarness((models) => addSyntheticModel(models, "tiny").then(() => undefined), {
    trustRequestChatTemplate: true,
    templates: { workers: 2, timeoutMs: 1000, maxOutputChars: 1_000_000 },
    requestLimits: { ...SERVER_DEFAULTS.requestLimits, requestTimeoutMs: 60_000 },
  });
});
afterAll(() => h?.dispose());

/** A hang is a failure: no answer within this long. */
const ANSWER_WITHIN_MS = 60_000;

/** POSTs a body (object → JSON; string or bytes as they are) to the chat route with the key. */
async function post(body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(`${h.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${h.key}`, ...headers },
    body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
  });
  return reply(res);
}

type Expect = "4xx" | "200" | "200|4xx";

/** Checks one answer; returns a description of what is wrong, or nothing. */
function problem(r: Reply, expected: Expect): string | undefined {
  const shown = `${r.status} ${r.text.slice(0, 300)}`;
  if (r.status >= 500) return `5xx: ${shown}`;
  if (r.status === 200) return expected === "4xx" ? `accepted: ${shown}` : undefined;
  if (expected === "200") return `refused: ${shown}`;
  if (r.status < 400 || r.status >= 500) return `unexpected status: ${shown}`;
  const e = (r.json as { error?: Record<string, unknown> } | undefined)?.error;
  if (!e || typeof e.message !== "string" || typeof e.type !== "string" || !("param" in e) || !("code" in e))
    return `not an OpenAI error body: ${shown}`;
  return undefined;
}

interface Case {
  name: string;
  body: unknown;
  expect: Expect;
}

/** Sends every case (a few at a time) and reports all that misbehave at once. */
async function run(cases: Case[], concurrency = 4): Promise<void> {
  const problems: string[] = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < cases.length; i = next++) {
      const c = cases[i]!;
      try {
        const p = problem(await post(c.body), c.expect);
        if (p) problems.push(`${c.name}: ${p}`);
      } catch (err) {
        problems.push(`${c.name}: no answer (${(err as Error).message})`);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  expect(problems).toEqual([]);
}

const valid = (over: Record<string, unknown> = {}) => tinyRequest(over);
/** A valid request with `field` set to raw JSON text `value` (in place of its own). */
function withRaw(field: string, value: string): string {
  const { [field]: _, ...rest } = valid();
  const others = JSON.stringify(rest).slice(1, -1);
  return `{"${field}":${value}${others ? `,${others}` : ""}}`;
}
const deep = (depth: number, open: string, close: string, inner = "1") =>
  open.repeat(depth) + inner + close.repeat(depth);

describe("hostile corpus", () => {
  it("nesting from the limit on is refused naming the field; many shallow brackets are not nesting", async () => {
    const at = (depth: number) => post(withRaw("chat_template_kwargs", deep(depth - 1, '{"a":', "}")));
    const refused = await at(MAX_JSON_DEPTH + 1);
    expect(refused.status).toBe(400);
    expect(refused.json).toMatchObject({
      error: { code: "nesting_too_deep", param: "chat_template_kwargs" },
    });
    const within = await at(MAX_JSON_DEPTH - 2);
    expect((within.json as { error?: { code?: string } }).error?.code).not.toBe("nesting_too_deep");
    // kv_transfer_params is echoed as it came: 256 sibling objects, two levels deep.
    const siblings = Object.fromEntries(Array.from({ length: 2 * MAX_JSON_DEPTH }, (_, i) => [`k${i}`, {}]));
    const wide = await post(valid({ kv_transfer_params: siblings }));
    expect(wide.status, wide.text).toBe(200);
  });

  it("deep nesting", async () => {
    const cases: Case[] = [];
    for (const depth of [1_000, 100_000]) {
      cases.push(
        { name: `array body ${depth}`, body: deep(depth, "[", "]"), expect: "4xx" },
        {
          name: `content ${depth}`,
          body: withRaw("messages", `[{"role":"user","content":${deep(depth, "[", "]")}}]`),
          expect: "4xx",
        },
        {
          name: `kwargs ${depth}`,
          body: withRaw("chat_template_kwargs", deep(depth, '{"a":', "}")),
          expect: "200|4xx",
        },
        {
          name: `logit_bias ${depth}`,
          body: withRaw("logit_bias", deep(depth, '{"1":', "}")),
          expect: "4xx",
        },
        {
          name: `response_format ${depth}`,
          body: withRaw(
            "response_format",
            `{"type":"json_schema","json_schema":{"name":"x","schema":${deep(depth, '{"properties":{"a":', "}}", "{}")}}}`,
          ),
          expect: "200|4xx",
        },
        {
          name: `tools ${depth}`,
          body: withRaw(
            "tools",
            `[{"type":"function","function":{"name":"f","parameters":${deep(depth, '{"a":', "}")}}}]`,
          ),
          expect: "200|4xx",
        },
        {
          name: `documents ${depth}`,
          body: withRaw("documents", `[${deep(depth, '{"a":', "}")}]`),
          expect: "200|4xx",
        },
        {
          name: `kv_transfer_params ${depth}`,
          body: withRaw("kv_transfer_params", deep(depth, '{"a":', "}")),
          expect: "200|4xx",
        },
        {
          name: `structured_outputs ${depth}`,
          body: withRaw("structured_outputs", deep(depth, '{"json":', "}")),
          expect: "4xx",
        },
      );
    }
    await run(cases, 2);
  });

  it("huge strings", async () => {
    const big = "x".repeat(10 << 20);
    const seven = "y".repeat(7 << 20);
    await run(
      [
        { name: "10 MB content", body: valid({ messages: [{ role: "user", content: big }] }), expect: "4xx" },
        { name: "7 MB model", body: valid({ model: seven }), expect: "4xx" },
        { name: "7 MB user", body: valid({ user: seven }), expect: "200|4xx" },
        { name: "7 MB stop", body: valid({ stop: [seven] }), expect: "200|4xx" },
        { name: "7 MB request_id", body: valid({ request_id: seven }), expect: "4xx" },
        { name: "7 MB role", body: valid({ messages: [{ role: seven, content: "hi" }] }), expect: "200|4xx" },
        { name: "7 MB unknown field name", body: withRaw(seven, "1"), expect: "4xx" },
        { name: "7 MB cache_salt", body: valid({ cache_salt: seven }), expect: "200|4xx" },
      ],
      1,
    );
  });

  it("non-finite, negative zero and out-of-range numbers", async () => {
    const cases: Case[] = [];
    const numeric = [
      "temperature",
      "top_p",
      "top_k",
      "min_p",
      "frequency_penalty",
      "presence_penalty",
      "repetition_penalty",
      "length_penalty",
      "max_tokens",
      "max_completion_tokens",
      "n",
      "seed",
      "top_logprobs",
      "min_tokens",
      "truncate_prompt_tokens",
      "prompt_logprobs",
      "priority",
    ];
    for (const field of numeric) {
      for (const value of ["NaN", "Infinity", "-Infinity", "1e309", "-1e309"])
        cases.push({ name: `${field}=${value}`, body: withRaw(field, value), expect: "4xx" });
      for (const value of [
        "-0",
        "-0.0",
        "18446744073709551616",
        "-18446744073709551617",
        "1e-320",
        "0.5",
        "1e20",
      ])
        cases.push({ name: `${field}=${value}`, body: withRaw(field, value), expect: "200|4xx" });
    }
    cases.push(
      { name: "seed 2^64", body: withRaw("seed", "18446744073709551616"), expect: "4xx" },
      { name: "seed -0 is seed 0", body: withRaw("seed", "-0"), expect: "200" },
      { name: "temperature -0", body: withRaw("temperature", "-0"), expect: "200" },
      { name: "logit_bias NaN", body: withRaw("logit_bias", '{"1": NaN}'), expect: "4xx" },
      { name: "logit_bias 1e309", body: withRaw("logit_bias", '{"1": 1e309}'), expect: "4xx" },
      {
        name: "logit_bias key 2^64",
        body: withRaw("logit_bias", '{"18446744073709551616": 1}'),
        expect: "4xx",
      },
      { name: "logit_bias key -0", body: withRaw("logit_bias", '{"-0": 1}'), expect: "200|4xx" },
      {
        name: "stop_token_ids 2^64",
        body: withRaw("stop_token_ids", "[18446744073709551616]"),
        expect: "4xx",
      },
      { name: "allowed_token_ids -0", body: withRaw("allowed_token_ids", "[-0]"), expect: "200|4xx" },
    );
    await run(cases);
  });

  it("duplicate keys", async () => {
    const base = JSON.stringify(valid()).slice(1, -1);
    await run([
      { name: "model twice", body: `{${base},"model":"nope"}`, expect: "4xx" },
      { name: "seed twice", body: `{${base},"seed":1,"seed":18446744073709551616}`, expect: "4xx" },
      {
        name: "seed twice, last valid",
        body: `{${base},"seed":18446744073709551616,"seed":1}`,
        expect: "200",
      },
      { name: "messages twice", body: `{${base},"messages":[]}`, expect: "4xx" },
      { name: "max_tokens twice", body: `{${base},"max_tokens":1000000}`, expect: "4xx" },
      // The last value wins, as JSON.parse has it; logit_bias clamps to [-100, 100].
      { name: "nested duplicate", body: `{${base},"logit_bias":{"1":1,"1":200}}`, expect: "200" },
    ]);
  });

  it("wrong types in every field", async () => {
    const values = [
      "null",
      "true",
      "0",
      "-1",
      "1.5",
      '"x"',
      '""',
      "[]",
      "[null]",
      "{}",
      '{"a":1}',
      '[{"type":"x"}]',
    ];
    const cases: Case[] = [];
    for (const field of SPEC_REQUEST_FIELDS)
      for (const value of values)
        cases.push({
          name: `${field}=${value}`,
          body:
            field === "messages" || field === "model"
              ? JSON.stringify({ ...valid(), [field]: JSON.parse(value) })
              : withRaw(field, value),
          expect: "200|4xx",
        });
    const message = (m: unknown) => valid({ messages: [m] });
    for (const value of [null, 1, "x", [], [1], {}])
      for (const key of ["role", "content", "name", "tool_calls", "tool_call_id", "reasoning"])
        cases.push({
          name: `message.${key}=${JSON.stringify(value)}`,
          body: message({ role: "user", content: "hi", [key]: value }),
          expect: "200|4xx",
        });
    for (const body of ["null", "1", '"x"', "[]", "{}", "true"])
      cases.push({ name: `body ${body}`, body, expect: "4xx" });
    await run(cases);
  });

  it("request ids no header can carry", async () => {
    await run([
      { name: "newline", body: valid({ request_id: "a\nb" }), expect: "200" },
      { name: "non-ASCII", body: valid({ request_id: "é✓😀" }), expect: "200" },
      { name: "NUL", body: valid({ request_id: "\u0000" }), expect: "200" },
      { name: "lone surrogate", body: withRaw("request_id", '"\\ud800"'), expect: "200|4xx" },
      { name: "empty", body: valid({ request_id: "" }), expect: "200" },
    ]);
    const r = await post(valid({ request_id: "é\n" }));
    expect(r.headers.get("x-request-id")).toBe(encodeURIComponent("é\n"));
  });

  it("invalid UTF-8 and lone surrogates", async () => {
    const bytes = (...parts: (string | number[])[]) =>
      Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : Buffer.from(p))));
    const prefix = '{"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"';
    const suffix = '"}]}';
    await run([
      { name: "0xff byte", body: bytes(prefix, [0xff, 0xfe], suffix), expect: "200|4xx" },
      { name: "truncated sequence", body: bytes(prefix, [0xe2, 0x82], suffix), expect: "200|4xx" },
      { name: "overlong encoding", body: bytes(prefix, [0xc0, 0xaf], suffix), expect: "200|4xx" },
      { name: "encoded surrogate", body: bytes(prefix, [0xed, 0xa0, 0x80], suffix), expect: "200|4xx" },
      { name: "invalid byte in a key", body: bytes('{"mo', [0xff], 'del":"tiny"}'), expect: "4xx" },
      { name: "lone high surrogate", body: `${prefix}a\\ud800b${suffix}`, expect: "200|4xx" },
      { name: "lone low surrogate", body: `${prefix}\\udc00${suffix}`, expect: "200|4xx" },
      { name: "surrogate in stop", body: withRaw("stop", '["\\ud800"]'), expect: "200|4xx" },
      {
        name: "surrogate in model",
        body: JSON.stringify(valid()).replace('"tiny"', '"ti\\ud800ny"'),
        expect: "4xx",
      },
      { name: "surrogate in logit_bias key", body: withRaw("logit_bias", '{"\\ud800":1}'), expect: "4xx" },
      { name: "NUL in content", body: `${prefix}a\\u0000b${suffix}`, expect: "200|4xx" },
      { name: "UTF-16 body", body: Buffer.from(JSON.stringify(valid()), "utf16le"), expect: "4xx" },
      { name: "latin1 charset", body: JSON.stringify(valid()), expect: "200|4xx" },
    ]);
    const r = await post(JSON.stringify(valid()), { "Content-Type": "application/json; charset=utf-7" });
    expect(problem(r, "200|4xx")).toBeUndefined();
  });

  it("huge n, max_tokens, top_logprobs and logit_bias", async () => {
    const bias = (entries: number) =>
      Object.fromEntries(Array.from({ length: entries }, (_, i) => [String(i), 1]));
    await run(
      [
        { name: "n 1e6", body: valid({ n: 1_000_000 }), expect: "4xx" },
        { name: "n 2^31", body: valid({ n: 2 ** 31 }), expect: "4xx" },
        { name: "best_of-ish beams", body: valid({ n: 1_000, use_beam_search: true }), expect: "4xx" },
        { name: "max_tokens 1e12", body: valid({ max_tokens: 1e12 }), expect: "4xx" },
        {
          name: "max_completion_tokens 2^53",
          body: valid({ max_completion_tokens: 2 ** 53 }),
          expect: "4xx",
        },
        { name: "top_logprobs 1e6", body: valid({ logprobs: true, top_logprobs: 1_000_000 }), expect: "4xx" },
        { name: "prompt_logprobs 1e6", body: valid({ prompt_logprobs: 1_000_000 }), expect: "4xx" },
        { name: "logit_bias 100k entries", body: valid({ logit_bias: bias(100_000) }), expect: "4xx" },
        { name: "logit_bias 269 entries", body: valid({ logit_bias: bias(269) }), expect: "200|4xx" },
        {
          name: "stop_token_ids 100k",
          body: valid({ stop_token_ids: Array.from({ length: 100_000 }, (_, i) => i % 200) }),
          expect: "200|4xx",
        },
        {
          name: "allowed_token_ids 100k",
          body: valid({ allowed_token_ids: Array.from({ length: 100_000 }, (_, i) => i % 200) }),
          expect: "200|4xx",
        },
        {
          name: "bad_words 10k",
          body: valid({ bad_words: Array.from({ length: 10_000 }, (_, i) => `w${i}`) }),
          expect: "200|4xx",
        },
        {
          name: "100k messages",
          body: valid({ messages: Array.from({ length: 100_000 }, () => ({ role: "user", content: "a" })) }),
          expect: "4xx",
        },
        {
          name: "n 4 with 200 tokens and top_logprobs 20",
          body: valid({ n: 4, max_tokens: 200, logprobs: true, top_logprobs: 20, ignore_eos: true }),
          expect: "200",
        },
      ],
      2,
    );
  });

  it("stop strings that are regex bombs, empty or many", async () => {
    const content = "aaaa".repeat(20);
    await run([
      {
        name: "regex bomb",
        body: valid({
          stop: ["(a+)+$", "^(a|aa)+$", ".*.*.*.*=", "\\"],
          messages: [{ role: "user", content }],
          max_tokens: 20,
        }),
        expect: "200",
      },
      { name: "empty stop", body: valid({ stop: [""] }), expect: "200|4xx" },
      { name: "empty stop string", body: valid({ stop: "" }), expect: "200|4xx" },
      {
        name: "many stops",
        body: valid({ stop: Array.from({ length: 10_000 }, (_, i) => `s${i}`) }),
        expect: "200|4xx",
      },
      { name: "long stop", body: valid({ stop: ["z".repeat(100_000)], max_tokens: 20 }), expect: "200|4xx" },
      { name: "bad_words regex", body: valid({ bad_words: ["(a+)+$", ""] }), expect: "200|4xx" },
    ]);
  });

  it("templates that loop, raise, recurse or grow", async () => {
    await run(
      [
        {
          name: "nested range(999999)",
          body: valid({
            chat_template:
              "{% for i in range(999999) %}{% for j in range(999999) %}{{ '' }}{% endfor %}{% endfor %}",
          }),
          expect: "4xx",
        },
        { name: "raise", body: valid({ chat_template: "{{ raise_exception('no') }}" }), expect: "4xx" },
        {
          name: "recursive macro",
          body: valid({ chat_template: "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}" }),
          expect: "4xx",
        },
        { name: "string growth", body: valid({ chat_template: "{{ 'x' * 1000000000 }}" }), expect: "4xx" },
        {
          name: "doubling",
          body: valid({
            chat_template:
              "{% set s = namespace(x='xx') %}{% for i in range(64) %}{% set s.x = s.x + s.x %}{% endfor %}{{ s.x }}",
          }),
          expect: "4xx",
        },
        {
          name: "range 10^9",
          body: valid({ chat_template: "{% for i in range(1000000000) %}{% endfor %}" }),
          expect: "4xx",
        },
        { name: "unparsable", body: valid({ chat_template: "{% for %}" }), expect: "4xx" },
        {
          name: "undefined filter",
          body: valid({ chat_template: "{{ messages | nosuchfilter }}" }),
          expect: "4xx",
        },
        { name: "empty output", body: valid({ chat_template: "{{ '' }}" }), expect: "4xx" },
        {
          name: "kwargs as a template",
          body: valid({ chat_template_kwargs: { chat_template: "{{ 1 }}" } }),
          expect: "4xx",
        },
      ],
      2,
    );
  });

  it("prompts at the context limit and one past it", async () => {
    // A template that passes the content through, so the prompt is exactly the content's tokens.
    const plain = (words: number, extra: Record<string, unknown> = {}) =>
      valid({
        chat_template: "{{ messages[0].content }}",
        messages: [{ role: "user", content: "a ".repeat(words).trim() }],
        ...extra,
      });
    /** The prompt's tokens, or Infinity when it leaves no room in the context. */
    const promptTokens = async (words: number) => {
      const r = await post(plain(words, { max_tokens: undefined }));
      if (r.status === 400) return Number.POSITIVE_INFINITY;
      expect(r.status, r.text).toBe(200);
      return (r.json as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
    };
    // Find the word count whose prompt is exactly CONTEXT - 1 tokens (growth is monotonic).
    let lo = 1;
    let hi = CONTEXT;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if ((await promptTokens(mid)) <= CONTEXT - 1) lo = mid;
      else hi = mid - 1;
    }
    expect(await promptTokens(lo)).toBe(CONTEXT - 1);
    const words = lo;
    await run([
      { name: "prompt + max_tokens = context", body: plain(words, { max_tokens: 1 }), expect: "200" },
      { name: "prompt + max_tokens = context + 1", body: plain(words, { max_tokens: 2 }), expect: "4xx" },
      {
        name: "prompt = context - 1, no max_tokens",
        body: plain(words, { max_tokens: undefined }),
        expect: "200",
      },
      { name: "prompt = context", body: plain(words + 1, { max_tokens: undefined }), expect: "4xx" },
      { name: "prompt = context + 1", body: plain(words + 2, { max_tokens: undefined }), expect: "4xx" },
      { name: "far past", body: plain(5_000, { max_tokens: undefined }), expect: "4xx" },
      {
        name: "truncated to fit",
        body: plain(5_000, { truncate_prompt_tokens: CONTEXT - 2 }),
        expect: "200",
      },
    ]);
  });

  it("the server is healthy afterwards", async () => {
    expect((await get(h, "/health", {})).status).toBe(200);
    const r = await post(valid({ max_tokens: 4 }));
    expect(r.status, r.text).toBe(200);
    const m = (await get(h, "/metrics", {})).text;
    expect(m).toMatch(/^ortserve_admission_waiting_requests 0$/m);
    expect(m).not.toMatch(/^ortserve_errors_total\{[^}]*status="5\d\d"/m);
  });
});

/**
 * The same kinds of hostile input on the routes translated into the chat request (Messages,
 * count_tokens, Responses) and on /tokenize and /detokenize: each answers in its own error shape.
 */
describe("hostile corpus on the Messages, Responses and tokenize routes", () => {
  const ANTHROPIC = new Set(["/v1/messages", "/v1/messages/count_tokens"]);
  const valid: Record<string, Record<string, unknown>> = {
    "/v1/messages": { model: "tiny", max_tokens: 1, messages: [{ role: "user", content: "hi" }] },
    "/v1/messages/count_tokens": { model: "tiny", messages: [{ role: "user", content: "hi" }] },
    "/v1/responses": { model: "tiny", max_output_tokens: 1, input: "hi" },
    "/tokenize": { model: "tiny", prompt: "hi" },
    "/detokenize": { model: "tiny", tokens: [1, 2] },
  };

  async function postTo(path: string, body: unknown): Promise<Reply> {
    const res = await fetch(`${h.url}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${h.key}` },
      body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
    });
    return reply(res);
  }

  /** problem() for the OpenAI routes; Anthropic's body on the Messages routes. */
  function routeProblem(path: string, r: Reply, expected: Expect): string | undefined {
    if (!ANTHROPIC.has(path) || r.status < 400 || r.status >= 500) return problem(r, expected);
    const body = r.json as { type?: unknown; error?: { type?: unknown; message?: unknown } } | undefined;
    if (
      body?.type !== "error" ||
      typeof body.error?.type !== "string" ||
      typeof body.error.message !== "string"
    )
      return `not an Anthropic error body: ${r.status} ${r.text.slice(0, 300)}`;
    return undefined;
  }

  const wrongValues = [null, true, -1, 1.5, "x", [], {}, [null], { a: 1 }];

  for (const path of Object.keys(valid)) {
    it(`${path}: wrong types in every field, deep nesting, huge strings, bad UTF-8 and numbers`, async () => {
      const base = valid[path]!;
      const cases: { name: string; body: unknown; expect: Expect }[] = [
        { name: "valid", body: base, expect: "200" },
        { name: "not an object", body: "[]", expect: "4xx" },
        { name: "invalid JSON", body: "{", expect: "4xx" },
        {
          name: "deep nesting",
          body: JSON.stringify({ ...base, extra: "__DEEP__" }).replace(
            '"__DEEP__"',
            "[".repeat(5000) + "]".repeat(5000),
          ),
          expect: "4xx",
        },
        {
          name: "invalid UTF-8",
          body: new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
          expect: "4xx",
        },
        {
          name: "lone surrogate",
          body: JSON.stringify(base).replace('"hi"', '"\\ud800"'),
          expect: "200|4xx",
        },
        {
          name: "huge string",
          body: JSON.stringify(base).replace('"hi"', `"${"a ".repeat(200_000)}"`),
          expect: "200|4xx",
        },
      ];
      for (const field of Object.keys(base))
        for (const value of wrongValues)
          cases.push({
            name: `${field}=${JSON.stringify(value)}`,
            body: { ...base, [field]: value },
            expect: "200|4xx",
          });
      for (const field of ["max_tokens", "max_output_tokens", "temperature", "top_p", "top_k"])
        for (const raw of ["NaN", "1e309", "-1e309", "18446744073709551616"])
          cases.push({
            name: `${field}=${raw}`,
            body: JSON.stringify({ ...base, [field]: "__RAW__" }).replace('"__RAW__"', raw),
            expect: "4xx",
          });
      cases.push(
        {
          name: "messages: image block",
          body: { ...base, messages: [{ role: "user", content: [{ type: "image", source: {} }] }] },
          expect: "4xx",
        },
        { name: "tokens out of the vocabulary", body: { ...base, tokens: [-1, 2 ** 53] }, expect: "4xx" },
        {
          name: "input: image part",
          body: { ...base, input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] },
          expect: "4xx",
        },
        {
          name: "input: items of every wrong kind",
          body: {
            ...base,
            input: [
              { type: "reasoning", summary: [] },
              { type: "item_reference", id: "x" },
              { role: "tool" },
            ],
          },
          expect: "4xx",
        },
        {
          name: "input: a function call whose arguments are not JSON",
          body: {
            ...base,
            input: [
              { type: "function_call", call_id: "c", name: "f", arguments: "{{{" },
              { type: "function_call_output", call_id: "c", output: [{ type: "input_text", text: "x" }] },
            ],
          },
          expect: "200|4xx",
        },
        { name: "tools: a built-in tool", body: { ...base, tools: [{ type: "web_search" }] }, expect: "4xx" },
        {
          name: "previous_response_id: none stored",
          body: { ...base, previous_response_id: `resp_${"0".repeat(10_000)}` },
          expect: "4xx",
        },
        {
          name: "text.format: a schema nested deep",
          body: {
            ...base,
            text: {
              format: {
                type: "json_schema",
                name: "x",
                schema: JSON.parse(deep(2000, '{"items":', "}", "{}")),
              },
            },
          },
          expect: "200|4xx",
        },
        {
          name: "metadata: 17 keys",
          body: {
            ...base,
            metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])),
          },
          expect: "4xx",
        },
      );
      const problems: string[] = [];
      for (const c of cases) {
        try {
          const p = routeProblem(path, await postTo(path, c.body), c.expect);
          if (p) problems.push(`${c.name}: ${p}`);
        } catch (err) {
          problems.push(`${c.name}: no answer (${(err as Error).message})`);
        }
      }
      expect(problems).toEqual([]);
    });
  }

  it("stored responses: unknown, oversized and hostile ids are 404s in OpenAI's shape", async () => {
    for (const id of ["resp_nothing", `resp_${"a".repeat(100_000)}`, "%00", "..%2F..", "%F0%9F%98%80"])
      for (const [method, tail] of [
        ["GET", ""],
        ["DELETE", ""],
        ["GET", "/input_items"],
        ["GET", "/input_items?limit=%00&after=%F0&order=asc"],
      ]) {
        const res = await fetch(`${h.url}/v1/responses/${id}${tail}`, {
          method,
          headers: { Authorization: `Bearer ${h.key}` },
          signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
        });
        const r = await reply(res);
        expect([404, 414, 431], `${method} ${id.slice(0, 20)}: ${r.text.slice(0, 200)}`).toContain(r.status);
        if (r.status === 404) expect(problem(r, "4xx")).toBeUndefined();
      }
  });

  it("a bad key on the Messages route is Anthropic's authentication_error, by x-api-key too", async () => {
    for (const headers of [{ "x-api-key": "wrong" }, { Authorization: "Bearer wrong" }, {}]) {
      const res = await fetch(`${h.url}/v1/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        body: JSON.stringify(valid["/v1/messages"]),
      });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ type: "error", error: { type: "authentication_error" } });
    }
    const ok = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "x-api-key": h.key, "anthropic-version": "2023-06-01" },
      body: JSON.stringify(valid["/v1/messages"]),
    });
    expect(ok.status).toBe(200);
  });
});
