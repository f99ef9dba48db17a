/** Request validation: every field's accepted edges and rejected values, defaults and cross-field rules. */
import { describe, expect, it } from "vitest";
import { parseChatCompletionRequest } from "../../src/protocol/chat-request.ts";
import { apiError, body, expect400, parse } from "./helpers.ts";

const tool = { type: "function", function: { name: "f", description: "d", parameters: { type: "object" } } };

interface FieldCase {
  field: string;
  ok: unknown[];
  bad: (unknown | { value: unknown; param: string })[];
  /** Fields that only exist together with others. */
  with?: Record<string, unknown>;
}

const bad = (value: unknown, param: string) => ({ value, param, [BAD]: true });
const BAD = Symbol("bad");
const isBad = (v: unknown): v is { value: unknown; param: string } =>
  typeof v === "object" && v !== null && BAD in v;

const cases: FieldCase[] = [
  { field: "model", ok: ["m", ""], bad: [5, null, [1]] },
  { field: "frequency_penalty", ok: [-2, 0, 2, 1.5, null], bad: [-2.01, 2.01, "1", true] },
  { field: "presence_penalty", ok: [-2, 2, null], bad: [-2.5, 3, "0"] },
  {
    field: "logit_bias",
    ok: [{ "5": 1 }, { "0": -100, "12": 100 }, {}, null],
    bad: [{ abc: 1 }, { "1.5": 1 }, bad({ "5": "x" }, "logit_bias.5"), [1], "x"],
  },
  { field: "logprobs", ok: [true, false, null], bad: [1, "true"] },
  { field: "top_logprobs", ok: [0, 1, 20, 21, -1, null], bad: [-2, 1.5, "3"], with: { logprobs: true } },
  { field: "max_tokens", ok: [1, 100_000, null], bad: [0, -5, 1.5, "10"] },
  { field: "max_completion_tokens", ok: [1, 4096, null], bad: [0, -1, 2.5] },
  { field: "n", ok: [1, 2, 64, null], bad: [0, -1, 1.5, "2"] },
  {
    field: "response_format",
    ok: [{ type: "text" }, null],
    bad: [
      bad({ type: "xml" }, "response_format.type"),
      bad({}, "response_format.type"),
      bad({ type: "text", extra: 1 }, "response_format.extra"),
      bad({ type: "json_schema", json_schema: { schema: {} } }, "response_format.json_schema.name"),
      "x",
    ],
  },
  { field: "seed", ok: [0, -1, 42, -(2 ** 53 - 1), 2 ** 53 - 1, null], bad: [1.5, "1", true] },
  { field: "stop", ok: ["x", ["a", "b"], [], null], bad: ["", ["a", ""], bad([1], "stop[0]"), 5] },
  { field: "stream", ok: [true, false, null], bad: ["yes", 1] },
  { field: "temperature", ok: [0, 1e-6, 0.7, 2, null], bad: [-0.1, 2.01, "hot"] },
  { field: "top_p", ok: [1, 1e-9, 0.5, null], bad: [0, 1.01, -1] },
  {
    field: "tools",
    ok: [[tool], [{ type: "function", function: { name: "g" } }], null],
    bad: [
      [],
      bad([{ type: "other", function: { name: "g" } }], "tools[0].type"),
      bad([{ type: "function", function: {} }], "tools[0].function.name"),
      bad([{ type: "function", function: { name: "g", parameters: "x" } }], "tools[0].function.parameters"),
      bad([{ type: "function", function: { name: "g" }, extra: 1 }], "tools[0].extra"),
    ],
  },
  {
    field: "tool_choice",
    ok: ["none", null, "auto", "required", { type: "function", function: { name: "f" } }],
    bad: [
      "any",
      1,
      bad({ type: "function" }, "tool_choice.function"),
      bad({ type: "function", function: { name: "g" } }, "tool_choice.function.name"),
    ],
    with: { tools: [tool] },
  },
  { field: "reasoning_effort", ok: ["low", "medium", "high", null], bad: ["max", "minimal", 1] },
  { field: "include_reasoning", ok: [true, false], bad: [null, "no"] },
  { field: "thinking_token_budget", ok: [0, 1024, null], bad: [-1, 1.5, "8"] },
  { field: "parallel_tool_calls", ok: [true, false, null], bad: [0] },
  { field: "user", ok: ["u", null], bad: [1] },
  { field: "use_beam_search", ok: [true, false], bad: [null, 1] },
  { field: "top_k", ok: [-1, 0, 1, 50, null], bad: [-2, 1.5] },
  { field: "min_p", ok: [0, 0.5, 1, null], bad: [-0.1, 1.1] },
  { field: "repetition_penalty", ok: [0.01, 1, 10, null], bad: [0, -1] },
  { field: "length_penalty", ok: [-1, 0, 2.5], bad: [null, "x"] },
  { field: "stop_token_ids", ok: [[1, 2], [], null], bad: [bad([1.5], "stop_token_ids[0]"), "1"] },
  { field: "include_stop_str_in_output", ok: [true, false], bad: [null] },
  { field: "ignore_eos", ok: [true, false], bad: ["x"] },
  { field: "min_tokens", ok: [0, 10], bad: [-1, null, 1.5] },
  { field: "skip_special_tokens", ok: [true, false], bad: [null] },
  { field: "spaces_between_special_tokens", ok: [true, false], bad: [1] },
  { field: "truncate_prompt_tokens", ok: [-1, 1, 512, null], bad: [-2, 0, 1.5, "5"] },
  { field: "prompt_logprobs", ok: [-1, 0, 5, 20, null], bad: [-2, 0.5] },
  { field: "allowed_token_ids", ok: [[1], [0, 5], null], bad: [[], bad([1.5], "allowed_token_ids[0]")] },
  { field: "bad_words", ok: [["x"], []], bad: [bad([""], "bad_words[0]"), null, "x"] },
  { field: "echo", ok: [true, false], bad: [null] },
  { field: "add_generation_prompt", ok: [true, false], bad: [null] },
  { field: "continue_final_message", ok: [false], bad: [null, "yes"] },
  { field: "add_special_tokens", ok: [true, false], bad: [null] },
  {
    field: "documents",
    ok: [[{ title: "a", text: "b" }], [], null],
    bad: [bad([1], "documents[0]"), {}],
  },
  { field: "chat_template", ok: ["{{ messages }}", null], bad: [1] },
  { field: "chat_template_kwargs", ok: [{ enable_thinking: false }, {}, null], bad: [[], "x"] },
  { field: "mm_processor_kwargs", ok: [null], bad: [{}, { a: 1 }, "x"] },
  { field: "priority", ok: [0, -5, 10], bad: [1.5, "1", null] },
  { field: "request_id", ok: ["abc"], bad: [1, null] },
  { field: "return_tokens_as_token_ids", ok: [true, false, null], bad: ["x"] },
  { field: "return_token_ids", ok: [true, false, null], bad: [1] },
  {
    field: "cache_salt",
    ok: ["a", "x".repeat(128), "base64+salt=", null],
    bad: ["", "x".repeat(129), "a@b", "a/b", "a\\b", "a\0b", 5],
  },
  { field: "kv_transfer_params", ok: [{ do_remote_decode: true }, null], bad: [[1], "x"] },
  {
    field: "engine_xargs",
    ok: [{}, null],
    bad: [
      bad({ any_key: 1 }, "engine_xargs.any_key"),
      bad({ k: { nested: 1 } }, "engine_xargs.k"),
      bad({ k: [[1]] }, "engine_xargs.k[0]"),
      [1],
    ],
  },
  {
    field: "repetition_detection",
    ok: [{}, { max_pattern_size: 0 }, { max_pattern_size: 3, min_pattern_size: 1, min_count: 2 }, null],
    bad: [
      bad({ max_pattern_size: 2, min_count: 1 }, "repetition_detection.min_count"),
      bad({ max_pattern_size: -1 }, "repetition_detection.max_pattern_size"),
      { min_pattern_size: 3, max_pattern_size: 2, min_count: 2 },
      bad(
        { min_pattern_size: -1, max_pattern_size: 2, min_count: 2 },
        "repetition_detection.min_pattern_size",
      ),
      bad({ max_pattern_size: 1.5 }, "repetition_detection.max_pattern_size"),
      bad({ foo: 1 }, "repetition_detection.foo"),
    ],
  },
  {
    field: "stream_options",
    ok: [{ include_usage: true }, { include_usage: true, continuous_usage_stats: true }, {}, null],
    bad: [
      bad({ include_usage: "yes" }, "stream_options.include_usage"),
      bad({ foo: true }, "stream_options.foo"),
      "x",
    ],
    with: { stream: true },
  },
];

describe("each field: accepted edges and rejected values", () => {
  for (const c of cases) {
    describe(c.field, () => {
      for (const value of c.ok)
        it(`accepts ${JSON.stringify(value)}`, () => {
          expect(() => parse({ ...c.with, [c.field]: value })).not.toThrow();
        });
      for (const b of c.bad) {
        const { value, param } = isBad(b) ? b : { value: b, param: c.field };
        it(`rejects ${JSON.stringify(value)} naming ${param}`, () => {
          expect400(() => parse({ ...c.with, [c.field]: value }), param);
        });
      }
    });
  }
});

describe("unknown fields", () => {
  it("rejects an unknown top-level field, naming it", () => {
    expect400(() => parse({ frobnicate: 1 }), "frobnicate", "unknown_parameter");
  });

  it("rejects unknown fields inside typed objects with their path", () => {
    expect400(
      () => parse({ stream: true, stream_options: { include_usage: true, x: 1 } }),
      "stream_options.x",
    );
    expect400(() => parse({ messages: [{ role: "user", content: "x", extra: 1 }] }), "messages[0].extra");
  });

  it("does not mistake prototype keys for fields", () => {
    expect400(
      () => parseChatCompletionRequest(JSON.parse('{"model":"m","messages":[],"__proto__":{}}')),
      "__proto__",
    );
    expect400(() => parse({ constructor: 1 }), "constructor");
  });
});

describe("body shape and model", () => {
  it("rejects a body that is not an object", () => {
    for (const b of [null, [], "x", 5]) expect400(() => parseChatCompletionRequest(b), null);
  });

  it("requires messages, non-empty", () => {
    expect400(() => parseChatCompletionRequest({ model: "m" }), "messages", "missing_required_parameter");
    expect400(() => parse({ messages: [] }), "messages");
    expect400(() => parse({ messages: "hi" }), "messages", "invalid_type");
  });

  it("requires a model: missing, or null (not a string)", () => {
    expect400(() => parseChatCompletionRequest({ messages: [{ role: "user", content: "x" }] }), "model");
    expect400(() => parse({ model: null }), "model", "invalid_type");
  });

  it("names the wrong type in the message", () => {
    const e = apiError(() => parse({ n: "2" }));
    expect(e.message).toBe("Invalid type for 'n': expected an integer, but got a string instead.");
    expect(e.code).toBe("invalid_type");
  });
});

describe("defaults", () => {
  it("fills every defaulted field and leaves the others absent", () => {
    const r = parse();
    const { request_id, ...rest } = r;
    expect(request_id).toMatch(/^[0-9a-f]{32}$/);
    expect(rest).toEqual({
      messages: [{ role: "user", content: "Hello" }],
      model: "m",
      frequency_penalty: 0,
      presence_penalty: 0,
      logprobs: false,
      top_logprobs: 0,
      n: 1,
      stop: [],
      stream: false,
      tool_choice: "none",
      include_reasoning: true,
      parallel_tool_calls: true,
      use_beam_search: false,
      length_penalty: 1,
      stop_token_ids: [],
      include_stop_str_in_output: false,
      ignore_eos: false,
      min_tokens: 0,
      skip_special_tokens: true,
      spaces_between_special_tokens: true,
      bad_words: [],
      echo: false,
      add_generation_prompt: true,
      continue_final_message: false,
      add_special_tokens: false,
      priority: 0,
      return_tokens_as_token_ids: false,
      return_token_ids: false,
    });
  });

  it("treats null like an absent field where the type allows null", () => {
    const r = parse({
      n: null,
      temperature: null,
      stop: null,
      logprobs: null,
      top_logprobs: null,
      seed: null,
    });
    expect([r.n, r.temperature, r.stop, r.logprobs, r.top_logprobs, r.seed]).toEqual([
      1,
      undefined,
      [],
      false,
      0,
      undefined,
    ]);
  });

  it("generates a fresh request_id per request and keeps a given one", () => {
    expect(parse().request_id).not.toBe(parse().request_id);
    expect(parse({ request_id: "my-id" }).request_id).toBe("my-id");
  });
});

describe("normalisation", () => {
  it("stop: a string becomes a one-item list", () => {
    expect(parse({ stop: "\n\n" }).stop).toEqual(["\n\n"]);
  });

  it("stop_token_ids and bad_words are deduplicated in order", () => {
    const r = parse({ stop_token_ids: [5, 3, 5, 1, 3], bad_words: ["b", "a", "b"] });
    expect(r.stop_token_ids).toEqual([5, 3, 1]);
    expect(r.bad_words).toEqual(["b", "a"]);
  });

  it("logit_bias: integer-string keys, values clamped to ±100, later equal ids win", () => {
    const r = parse({ logit_bias: { "5": 150, "6": -1000, "7": 3.5, "+8": 1, "08": 2 } });
    expect(r.logit_bias).toEqual({ ids: [5, 6, 7, 8], biases: [100, -100, 3.5, 2] });
  });

  it("logit_bias: a canonical id and another spelling of it are one id, the later spelling's bias", () => {
    expect(parse({ logit_bias: { "8": 1, " 8 ": 5, "80": 2 } }).logit_bias).toEqual({
      ids: [8, 80],
      biases: [5, 2],
    });
  });

  it("logit_bias: a non-integer key names the keys", () => {
    const e = expect400(() => parse({ logit_bias: { "12": 1, abc: 2, "1e3": 3 } }), "logit_bias");
    expect(e.message).toContain('"abc", "1e3"');
  });

  it("logit_bias: thousands of bad keys name the first ten and count the rest", () => {
    const bias = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, 1]));
    const e = expect400(() => parse({ logit_bias: bias }), "logit_bias");
    expect(e.message).toContain('"k0", "k1"');
    expect(e.message).toContain('"k9", and 4990 more.');
    expect(e.message).not.toContain('"k10"');
  });

  it("truncate_prompt_tokens beyond 2^53 is capped there", () => {
    const raw =
      '{"model":"m","messages":[{"role":"user","content":"x"}],"truncate_prompt_tokens":9223372036854775807}';
    expect(parseChatCompletionRequest(JSON.parse(raw), raw).truncate_prompt_tokens).toBe(
      Number.MAX_SAFE_INTEGER,
    );
    const over = raw.replace("9223372036854775807", "9223372036854775808");
    expect400(() => parseChatCompletionRequest(JSON.parse(over), over), "truncate_prompt_tokens");
  });

  it("response_format text and mm/structured fields do not reach the parsed request", () => {
    const r = parse({
      response_format: { type: "text" },
      mm_processor_kwargs: null,
      structured_outputs: null,
    });
    expect("response_format" in r || "mm_processor_kwargs" in r || "structured_outputs" in r).toBe(false);
  });

  it("keeps tools, template inputs and passthrough objects as given", () => {
    const r = parse({
      tools: [tool],
      documents: [{ title: "t", text: "x" }],
      chat_template_kwargs: { enable_thinking: true },
      reasoning_effort: "low",
      kv_transfer_params: { a: [1, 2] },
    });
    expect(r.tools).toEqual([tool]);
    expect(r.documents).toEqual([{ title: "t", text: "x" }]);
    expect(r.chat_template_kwargs).toEqual({ enable_thinking: true });
    expect(r.reasoning_effort).toBe("low");
    expect(r.kv_transfer_params).toEqual({ a: [1, 2] });
  });
});

describe("seed: the int64 range, exactly", () => {
  const raw = (seed: string) => `{"model":"m","messages":[{"role":"user","content":"x"}],"seed":${seed}}`;
  const parseRaw = (text: string) => parseChatCompletionRequest(JSON.parse(text), text);

  it("reads integers beyond 2^53 exactly from the raw text", () => {
    expect(parseRaw(raw("9223372036854775807")).seed).toBe(9223372036854775807n);
    expect(parseRaw(raw("-9223372036854775808")).seed).toBe(-9223372036854775808n);
    expect(parseRaw(raw("9007199254740993")).seed).toBe(9007199254740993n);
    expect(parseRaw(raw("42")).seed).toBe(42n);
  });

  it("rejects one past either end", () => {
    expect400(() => parseRaw(raw("9223372036854775808")), "seed");
    expect400(() => parseRaw(raw("-9223372036854775809")), "seed");
    expect400(() => parseRaw(raw("1e30")), "seed");
  });

  it("without the raw text, JSON.parse's rounding shows (int64 max rounds to 2^63)", () => {
    expect400(() => parseChatCompletionRequest(JSON.parse(raw("9223372036854775807"))), "seed");
    expect(parseChatCompletionRequest(body({ seed: 2 ** 60 })).seed).toBe(2n ** 60n);
  });

  it("accepts an already exact BigInt", () => {
    expect(parse({ seed: 9223372036854775807n }).seed).toBe(9223372036854775807n);
  });

  it("leaves big integers elsewhere in the body alone", () => {
    const text =
      '{"model":"m","messages":[{"role":"user","content":"x"}],"seed":9223372036854775807,"kv_transfer_params":{"seed":9223372036854775807}}';
    const r = parseRaw(text);
    expect(r.seed).toBe(9223372036854775807n);
    expect(typeof r.kv_transfer_params!.seed).toBe("number");
  });
});

describe("cross-field rules", () => {
  it("continue_final_message with add_generation_prompt (explicit or default) is a 400", () => {
    expect400(() => parse({ continue_final_message: true }), "continue_final_message");
    expect400(
      () => parse({ continue_final_message: true, add_generation_prompt: true }),
      "continue_final_message",
    );
    const r = parse({ continue_final_message: true, add_generation_prompt: false });
    expect([r.continue_final_message, r.add_generation_prompt]).toEqual([true, false]);
  });

  it("stream_options without stream is a 400; null is fine", () => {
    expect400(() => parse({ stream_options: { include_usage: true } }), "stream_options");
    expect400(() => parse({ stream: false, stream_options: {} }), "stream_options");
    expect(() => parse({ stream_options: null })).not.toThrow();
    expect(parse({ stream: true, stream_options: {} }).stream_options).toEqual({
      include_usage: false,
      continuous_usage_stats: false,
    });
  });

  it("prompt_logprobs > 0 or -1 with stream is a 400; 0 is allowed", () => {
    expect400(() => parse({ stream: true, prompt_logprobs: 1 }), "prompt_logprobs");
    expect400(() => parse({ stream: true, prompt_logprobs: -1 }), "prompt_logprobs");
    expect(parse({ stream: true, prompt_logprobs: 0 }).prompt_logprobs).toBe(0);
    expect(parse({ prompt_logprobs: 5 }).prompt_logprobs).toBe(5);
  });

  it("top_logprobs > 0 or -1 needs logprobs=true", () => {
    expect400(() => parse({ top_logprobs: 1 }), "top_logprobs");
    expect400(() => parse({ top_logprobs: -1, logprobs: false }), "top_logprobs");
    expect(parse({ top_logprobs: 0 }).top_logprobs).toBe(0);
    expect(parse({ top_logprobs: 5, logprobs: true }).top_logprobs).toBe(5);
  });

  it("min_tokens may not exceed the requested max tokens", () => {
    expect400(() => parse({ min_tokens: 11, max_tokens: 10 }), "min_tokens");
    expect400(() => parse({ min_tokens: 6, max_tokens: 100, max_completion_tokens: 5 }), "min_tokens");
    expect(parse({ min_tokens: 10, max_completion_tokens: 10 }).min_tokens).toBe(10);
    expect(parse({ min_tokens: 1000 }).min_tokens).toBe(1000);
  });

  it("tool_choice: none by default; anything else needs tools", () => {
    expect(parse({ tools: [tool] }).tool_choice).toBe("none");
    for (const choice of ["auto", "required", { type: "function", function: { name: "f" } }])
      expect400(() => parse({ tool_choice: choice }), "tool_choice");
  });
});

describe("features this server does not have are rejected, never ignored", () => {
  it("mm_processor_kwargs: text-only model", () => {
    const e = expect400(
      () => parse({ mm_processor_kwargs: {} }),
      "mm_processor_kwargs",
      "unsupported_parameter",
    );
    expect(e.message).toContain("text-only");
  });

  it("structured_outputs: exactly one constraint, its options, the backend", () => {
    expect400(() => parse({ structured_outputs: {} }), "structured_outputs", "invalid_value");
    expect400(
      () => parse({ structured_outputs: { regex: "a", choice: ["a"] } }),
      "structured_outputs",
      "invalid_value",
    );
    expect400(() => parse({ structured_outputs: { foo: 1 } }), "structured_outputs.foo", "unknown_parameter");
    expect400(() => parse({ structured_outputs: { regex: 1 } }), "structured_outputs.regex", "invalid_type");
    expect(parse({ structured_outputs: { regex: "a+" } }).constraint).toEqual({
      kind: "regex",
      pattern: "a+",
    });
    expect(parse({ structured_outputs: { choice: ["a", "b"] } }).constraint).toEqual({
      kind: "choice",
      choices: ["a", "b"],
    });
    expect(parse({ structured_outputs: { grammar: 'root ::= "x"' } }).constraint).toEqual({
      kind: "grammar",
      grammar: 'root ::= "x"',
    });
    // Whitespace left unsaid is the model's default (decided with the engine request); said, it wins.
    expect(parse({ structured_outputs: { json_object: true } }).constraint).toEqual({ kind: "json_object" });
    for (const disable of [true, false])
      expect(
        parse({ structured_outputs: { json_object: true, disable_any_whitespace: disable } }).constraint,
      ).toEqual({ kind: "json_object", anyWhitespace: !disable });
    // json as an object or as JSON text: the same constraint.
    const schema = { type: "object", properties: { a: { type: "integer" } } };
    const asObject = parse({ structured_outputs: { json: schema, disable_any_whitespace: true } }).constraint;
    expect(asObject).toEqual({ kind: "json_schema", schema: JSON.stringify(schema), anyWhitespace: false });
    expect(
      parse({ structured_outputs: { json: JSON.stringify(schema), disable_any_whitespace: true } })
        .constraint,
    ).toEqual(asObject);
    // disable_additional_properties closes every object schema that does not say otherwise.
    const closed = parse({
      structured_outputs: {
        json: { ...schema, $defs: { b: { properties: { properties: {} } } } },
        disable_additional_properties: true,
      },
    }).constraint as { schema: string };
    expect(JSON.parse(closed.schema)).toEqual({
      ...schema,
      additionalProperties: false,
      $defs: { b: { properties: { properties: {} }, additionalProperties: false } },
    });
    expect400(
      () => parse({ structured_outputs: { json: "{nope" } }),
      "structured_outputs.json",
      "invalid_value",
    );
    expect400(
      () => parse({ structured_outputs: { json_object: false } }),
      "structured_outputs.json_object",
      "invalid_value",
    );
    expect400(
      () => parse({ structured_outputs: { choice: [] } }),
      "structured_outputs.choice",
      "invalid_value",
    );
    expect400(
      () => parse({ structured_outputs: { regex: "a", disable_any_whitespace: true } }),
      "structured_outputs.disable_any_whitespace",
      "invalid_value",
    );
    expect400(
      () => parse({ structured_outputs: { regex: "a", whitespace_pattern: "[ ]?" } }),
      "structured_outputs.whitespace_pattern",
      "unsupported_parameter",
    );
    expect400(
      () => parse({ structured_outputs: { regex: "a", _backend: "outlines" } }),
      "structured_outputs._backend",
      "invalid_value",
    );
    for (const backend of ["xgrammar", "auto"])
      expect(
        parse({ structured_outputs: { regex: "a", _backend: backend, disable_fallback: true } }).constraint,
      ).toBeDefined();
    expect400(
      () => parse({ structured_outputs: { regex: "a" }, response_format: { type: "json_object" } }),
      "structured_outputs",
      "invalid_value",
    );
  });

  it("response_format json_object and json_schema", () => {
    expect(parse({ response_format: { type: "json_object" } }).constraint).toEqual({ kind: "json_object" });
    const schema = { type: "object", properties: { a: { type: "string" } } };
    // Without strict the schema is as sent (its objects open where it leaves them open)...
    for (const strict of [false, null])
      expect(
        parse({ response_format: { type: "json_schema", json_schema: { name: "x", schema, strict } } })
          .constraint,
      ).toEqual({ kind: "json_schema", schema: JSON.stringify(schema) });
    // ...strict closes every object that leaves additionalProperties unset, and only those.
    const nested = {
      ...schema,
      properties: { a: { type: "object", additionalProperties: true }, b: schema },
    };
    const strict = parse({
      response_format: { type: "json_schema", json_schema: { name: "x", schema: nested, strict: true } },
    }).constraint as { schema: string };
    expect(JSON.parse(strict.schema)).toEqual({
      ...nested,
      properties: { a: nested.properties.a, b: { ...schema, additionalProperties: false } },
      additionalProperties: false,
    });
    expect(parse({ response_format: { type: "text" } }).constraint).toBeUndefined();
    expect400(
      () => parse({ response_format: { type: "json_schema" } }),
      "response_format.json_schema",
      "invalid_value",
    );
  });
});
