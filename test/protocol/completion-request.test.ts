/** The completion request: prompt forms, completion-only fields, and the fields shared with chat. */
import { describe, expect, it } from "vitest";
import { completionRequestSchema, parseCompletionRequest } from "../../src/protocol/completion-request.ts";
import { buildOpenApiDocument } from "../../src/protocol/openapi.ts";
import { expect400 } from "./helpers.ts";

const parse = (overrides: Record<string, unknown> = {}) =>
  parseCompletionRequest({ model: "m", prompt: "Hello", ...overrides });

describe("parseCompletionRequest", () => {
  it("takes a prompt as a string, strings, token ids or arrays of token ids", () => {
    expect(parse().prompts).toEqual([{ text: "Hello" }]);
    expect(parse({ prompt: ["a", "b"] }).prompts).toEqual([{ text: "a" }, { text: "b" }]);
    expect(parse({ prompt: [1, 2, 3] }).prompts).toEqual([{ tokenIds: [1, 2, 3] }]);
    expect(parse({ prompt: [[1], [2, 3]] }).prompts).toEqual([{ tokenIds: [1] }, { tokenIds: [2, 3] }]);
  });

  it("refuses empty and mixed prompts, naming the element", () => {
    expect400(() => parse({ prompt: "" }), "prompt");
    expect400(() => parse({ prompt: [] }), "prompt");
    expect400(() => parse({ prompt: ["a", ""] }), "prompt[1]");
    expect400(() => parse({ prompt: ["a", 1] }), "prompt[1]", "invalid_type");
    expect400(() => parse({ prompt: [1, "a"] }), "prompt[1]", "invalid_type");
    expect400(() => parse({ prompt: [[1], []] }), "prompt[1]");
    expect400(() => parse({ prompt: [-1] }), "prompt[0]");
    expect400(() => parse({ prompt: { text: "x" } }), "prompt", "invalid_type");
    expect400(() => parseCompletionRequest({ model: "m" }), "prompt", "missing_required_parameter");
  });

  it("defaults as vLLM: max_tokens 16 (null: what the context leaves), add_special_tokens true, no echo", () => {
    const r = parse();
    expect(r).toMatchObject({ max_tokens: 16, add_special_tokens: true, echo: false, n: 1 });
    expect(r.logprobs).toBeUndefined();
    expect(parse({ max_tokens: null }).max_tokens).toBeUndefined();
    expect(parse({ max_tokens: 3 }).max_tokens).toBe(3);
  });

  it("takes integer logprobs (-1: the whole vocabulary) and refuses booleans", () => {
    expect(parse({ logprobs: 0 }).logprobs).toBe(0);
    expect(parse({ logprobs: 5 }).logprobs).toBe(5);
    expect(parse({ logprobs: -1 }).logprobs).toBe(-1);
    expect400(() => parse({ logprobs: -2 }), "logprobs");
    expect400(() => parse({ logprobs: true }), "logprobs", "invalid_type");
  });

  it("allows max_tokens 0 only with echo (scoring)", () => {
    expect(parse({ max_tokens: 0, echo: true }).max_tokens).toBe(0);
    expect400(() => parse({ max_tokens: 0 }), "max_tokens");
    expect400(() => parse({ max_tokens: -1 }), "max_tokens");
  });

  it("refuses suffix and a best_of other than n, naming them", () => {
    expect400(() => parse({ suffix: "!" }), "suffix", "unsupported_parameter");
    expect(parse({ suffix: null }).prompts).toHaveLength(1);
    expect(parse({ best_of: 2, n: 2, temperature: 1 }).n).toBe(2);
    expect400(() => parse({ best_of: 3 }), "best_of", "unsupported_parameter");
    expect400(() => parse({ best_of: 1, n: 2 }), "best_of");
  });

  it("shares the chat request's fields and rules", () => {
    const r = parse({
      stop: "x",
      seed: 7,
      stop_token_ids: [3, 3, 4],
      top_k: 5,
      priority: 0,
      cache_salt: "s",
    });
    expect(r).toMatchObject({ stop: ["x"], seed: 7n, stop_token_ids: [3, 4], top_k: 5, cache_salt: "s" });
    expect400(() => parse({ temperature: 3 }), "temperature");
    expect400(() => parse({ stream_options: { include_usage: true } }), "stream_options");
    expect400(() => parse({ min_tokens: 20 }), "min_tokens");
    expect400(() => parse({ stream: true, prompt_logprobs: 1 }), "prompt_logprobs");
    expect(parse({ structured_outputs: { regex: "a" } }).constraint_field).toBe("structured_outputs");
    expect400(() => parse({ structured_outputs: { regex: "a", choice: ["b"] } }), "structured_outputs");
    expect400(() => parseCompletionRequest({ prompt: "x" }), "model", "missing_required_parameter");
  });

  it("refuses the chat-only fields as unknown", () => {
    for (const field of ["messages", "max_completion_tokens", "top_logprobs", "chat_template", "tools"])
      expect400(() => parse({ [field]: null }), field, "unknown_parameter");
  });
});

describe("the OpenAPI document", () => {
  it("has the completions route with the validation schema's own request schema", () => {
    const doc = buildOpenApiDocument() as {
      paths: Record<string, { post?: { requestBody: unknown } }>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    expect(doc.paths["/v1/completions"]!.post!.requestBody).toEqual({
      required: true,
      content: { "application/json": { schema: { $ref: "#/components/schemas/CompletionRequest" } } },
    });
    const schema = doc.components.schemas.CompletionRequest!;
    expect(schema).toEqual(JSON.parse(JSON.stringify(completionRequestSchema.jsonSchema())));
    expect(Object.keys(schema.properties!)).toEqual(
      expect.arrayContaining(["prompt", "echo", "logprobs", "suffix", "best_of", "top_k"]),
    );
    expect(schema.properties).not.toHaveProperty("messages");
    expect(doc.components.schemas.CompletionResponse).toBeDefined();
    expect(doc.components.schemas.CompletionChunk).toBeDefined();
  });
});
