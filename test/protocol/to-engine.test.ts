/** Parsed request → EngineRequest: defaults, greedy rules, vocabulary checks, logprob counts. */
import { describe, expect, it } from "vitest";
import { type ToEngineOptions, toEngineRequest } from "../../src/protocol/to-engine.ts";
import { expect400, parse } from "./helpers.ts";

const opts: ToEngineOptions = {
  requestId: "req-1",
  prompt: { text: "<prompt>", addSpecialTokens: false },
  vocabSize: 100,
};

const engine = (overrides: Record<string, unknown> = {}, o: Partial<ToEngineOptions> = {}) =>
  toEngineRequest(parse(overrides), { ...opts, ...o });

describe("defaults", () => {
  it("maps a minimal request to the engine's defaults (vLLM's 1/1/0/0/1)", () => {
    expect(engine()).toEqual({
      requestId: "req-1",
      prompt: { text: "<prompt>", addSpecialTokens: false },
      n: 1,
      sampling: {
        temperature: 1,
        topP: 1,
        topK: 0,
        minP: 0,
        repetitionPenalty: 1,
        frequencyPenalty: 0,
        presencePenalty: 0,
        minTokens: 0,
        ignoreEos: false,
        stopTokenIds: [],
      },
      stop: [],
      includeStopStrInOutput: false,
      skipSpecialTokens: true,
      spacesBetweenSpecialTokens: true,
      returnTokensAsTokenIds: false,
      useBeamSearch: false,
      lengthPenalty: 1,
      priority: 0,
    });
  });

  it("omitted sampling fields come from the model's generation_config; given ones win", () => {
    const generationDefaults = {
      temperature: 0.6,
      top_p: 0.9,
      top_k: 40,
      min_p: 0.05,
      repetition_penalty: 1.1,
    };
    const s = engine({}, { generationDefaults }).sampling;
    expect([s.temperature, s.topP, s.topK, s.minP, s.repetitionPenalty]).toEqual([0.6, 0.9, 40, 0.05, 1.1]);
    const t = engine(
      { temperature: 1.2, top_p: 0.5, top_k: 5, min_p: 0, repetition_penalty: 1 },
      { generationDefaults },
    ).sampling;
    expect([t.temperature, t.topP, t.topK, t.minP, t.repetitionPenalty]).toEqual([1.2, 0.5, 5, 0, 1]);
  });

  it("passes the other request fields through", () => {
    const r = engine({
      n: 3,
      stop: ["END"],
      include_stop_str_in_output: true,
      skip_special_tokens: false,
      spaces_between_special_tokens: false,
      return_tokens_as_token_ids: true,
      min_tokens: 4,
      ignore_eos: true,
      frequency_penalty: 0.5,
      presence_penalty: -0.5,
      bad_words: ["bad"],
      truncate_prompt_tokens: -1,
      priority: -3,
      cache_salt: "salt",
      use_beam_search: true,
      length_penalty: 0.8,
    });
    expect(r).toMatchObject({
      n: 3,
      stop: ["END"],
      includeStopStrInOutput: true,
      skipSpecialTokens: false,
      spacesBetweenSpecialTokens: false,
      returnTokensAsTokenIds: true,
      truncatePromptTokens: -1,
      priority: -3,
      cacheSalt: "salt",
      useBeamSearch: true,
      lengthPenalty: 0.8,
      sampling: {
        minTokens: 4,
        ignoreEos: true,
        frequencyPenalty: 0.5,
        presencePenalty: -0.5,
        badWords: ["bad"],
      },
    });
  });
});

describe("max tokens", () => {
  it("max_completion_tokens wins over max_tokens; absent leaves it to the context", () => {
    expect(engine({ max_tokens: 10, max_completion_tokens: 20 }).maxTokens).toBe(20);
    expect(engine({ max_tokens: 10 }).maxTokens).toBe(10);
    expect("maxTokens" in engine()).toBe(false);
  });
});

describe("greedy", () => {
  it("temperature 0 resets top_p/top_k/min_p", () => {
    const s = engine({ temperature: 0, top_p: 0.5, top_k: 3, min_p: 0.2 }).sampling;
    expect([s.temperature, s.topP, s.topK, s.minP]).toEqual([0, 1, 0, 0]);
  });

  it("n > 1 with greedy is a 400 naming n, also when greedy comes from generation_config", () => {
    const e = expect400(() => engine({ temperature: 0, n: 2 }), "n");
    expect(e.message).toBe("n must be 1 when using greedy sampling, got 2.");
    expect400(() => engine({ n: 2 }, { generationDefaults: { temperature: 0 } }), "n");
    expect(engine({ temperature: 0, n: 1 }).n).toBe(1);
  });

  it("temperatures in (0, 0.01) are raised to 0.01 and are not greedy (vLLM)", () => {
    const r = engine({ temperature: 1e-6, n: 2, top_k: 3 });
    expect([r.sampling.temperature, r.sampling.topK, r.n]).toEqual([0.01, 3, 2]);
  });

  it("beam search is exempt from the greedy n check", () => {
    expect(engine({ temperature: 0, n: 2, use_beam_search: true }).n).toBe(2);
  });
});

describe("token ids against the vocabulary", () => {
  it("a vocabulary's worth of bad ids lists the first twenty and counts the rest", () => {
    const bias = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [String(i), 1]));
    const e = expect400(() => engine({ logit_bias: bias }), "logit_bias");
    expect(e.message).toBe(
      `token_id(s) [${Array.from({ length: 20 }, (_, i) => 100 + i).join(", ")}, and 49880 more] in logit_bias contain out-of-vocab token ids. Vocabulary size: 100`,
    );
  });

  it("logit_bias ids outside [0, vocab) are a 400 naming the ids and the vocab size", () => {
    const e = expect400(() => engine({ logit_bias: { "5": 1, "100": 2, "-1": 3 } }), "logit_bias");
    expect(e.message).toBe(
      "token_id(s) [100, -1] in logit_bias contain out-of-vocab token ids. Vocabulary size: 100",
    );
    expect(engine({ logit_bias: { "0": 150, "99": -2 } }).sampling.logitBias).toEqual({
      ids: [0, 99],
      biases: [100, -2],
    });
    expect(engine({ logit_bias: {} }).sampling.logitBias).toBeUndefined();
  });

  it("allowed_token_ids and stop_token_ids are range-checked", () => {
    expect400(() => engine({ allowed_token_ids: [1, 100] }), "allowed_token_ids");
    expect400(() => engine({ stop_token_ids: [-1] }), "stop_token_ids");
    expect(engine({ allowed_token_ids: [0, 99] }).sampling.allowedTokenIds).toEqual([0, 99]);
    expect(engine({ stop_token_ids: [7, 7, 8] }).sampling.stopTokenIds).toEqual([7, 8]);
  });
});

describe("seed", () => {
  it("becomes a BigInt; -1 means no seed", () => {
    expect(engine({ seed: 42 }).sampling.seed).toBe(42n);
    expect(engine({ seed: -5 }).sampling.seed).toBe(-5n);
    expect(engine({ seed: 9223372036854775807n }).sampling.seed).toBe(9223372036854775807n);
    expect("seed" in engine({ seed: -1 }).sampling).toBe(false);
    expect("seed" in engine().sampling).toBe(false);
  });
});

describe("logprobs", () => {
  it("logprobs=true asks for top_logprobs alternatives (0 allowed); false asks for none", () => {
    expect(engine({ logprobs: true }).logprobs).toBe(0);
    expect(engine({ logprobs: true, top_logprobs: 20 }).logprobs).toBe(20);
    expect("logprobs" in engine({ logprobs: false })).toBe(false);
  });

  it("at most 20 (vLLM's default max_logprobs); -1 is the whole vocabulary", () => {
    const e = expect400(() => engine({ logprobs: true, top_logprobs: 21 }), "top_logprobs");
    expect(e.message).toBe("Requested sample logprobs of 21, which is greater than max allowed: 20");
    expect400(() => engine({ logprobs: true, top_logprobs: -1 }), "top_logprobs");
    expect(engine({ logprobs: true, top_logprobs: -1 }, { maxLogprobs: -1 }).logprobs).toBe(100);
    expect(engine({ logprobs: true, top_logprobs: 50 }, { maxLogprobs: 50 }).logprobs).toBe(50);
  });

  it("prompt_logprobs: the same limit", () => {
    expect(engine({ prompt_logprobs: 0 }).promptLogprobs).toBe(0);
    expect(engine({ prompt_logprobs: 20 }).promptLogprobs).toBe(20);
    expect400(() => engine({ prompt_logprobs: 21 }), "prompt_logprobs");
    expect400(() => engine({ prompt_logprobs: -1 }), "prompt_logprobs");
    expect("promptLogprobs" in engine()).toBe(false);
  });
});

describe("repetition_detection", () => {
  it("maps to the engine's form; max 0 disables; min 0 means 1", () => {
    expect(
      engine({ repetition_detection: { max_pattern_size: 4, min_pattern_size: 0, min_count: 3 } })
        .repetitionDetection,
    ).toEqual({ minPatternSize: 1, maxPatternSize: 4, minCount: 3 });
    expect(engine({ repetition_detection: { max_pattern_size: 0 } }).repetitionDetection).toBeUndefined();
    expect(engine({ repetition_detection: {} }).repetitionDetection).toBeUndefined();
  });
});

describe("response_format", () => {
  it.each(["text", "json_object"])("json_schema beside type %s is a 400 naming it, never ignored", (type) => {
    const e = expect400(
      () => engine({ response_format: { type, json_schema: { name: "x", schema: { type: "object" } } } }),
      "response_format.json_schema",
    );
    expect(e.message).toBe("json_schema is only used with type 'json_schema'.");
  });

  it("type json_schema needs json_schema", () => {
    expect400(() => engine({ response_format: { type: "json_schema" } }), "response_format.json_schema");
  });
});

describe("whitespace inside JSON: the request's option, else the model's default", () => {
  const schema = { type: "object", properties: { a: { type: "integer" } } };
  const whitespace = (body: Record<string, unknown>, compactJson?: boolean) => {
    const c = engine(body, { compactJson }).constraint;
    return c && "anyWhitespace" in c ? c.anyWhitespace : undefined;
  };

  it("applies the model's default to every JSON constraint a request leaves unsaid", () => {
    for (const body of [
      { response_format: { type: "json_object" } },
      { response_format: { type: "json_schema", json_schema: { name: "x", schema } } },
      { structured_outputs: { json: schema } },
      { structured_outputs: { json_object: true } },
    ]) {
      expect(whitespace(body), JSON.stringify(body)).toBe(true);
      expect(whitespace(body, false), JSON.stringify(body)).toBe(true);
      expect(whitespace(body, true), JSON.stringify(body)).toBe(false);
    }
  });

  it("lets the request's own disable_any_whitespace win either way", () => {
    for (const [disable, compactJson] of [
      [false, true],
      [true, false],
    ] as const)
      expect(
        whitespace({ structured_outputs: { json: schema, disable_any_whitespace: disable } }, compactJson),
      ).toBe(!disable);
  });

  it("leaves constraints that are not JSON as they are", () => {
    expect(engine({ structured_outputs: { regex: "a+" } }, { compactJson: true }).constraint).toEqual({
      kind: "regex",
      pattern: "a+",
    });
  });
});
