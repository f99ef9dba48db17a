/** The OpenAPI document: generated from the validation schemas, covering every spec request field. */
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { chatCompletionRequestSchema } from "../../src/protocol/chat-request.ts";
import { buildOpenApiDocument } from "../../src/protocol/openapi.ts";
import { parseOpenAIProjectHeader, parseProjectHeader } from "../../src/storage/usage.ts";

const SPEC = "/work/shared/spec/service-spec.md";

/** The request table's field names, as of the spec this was written against (used when the spec file is absent). */
// biome-ignore format: a compact list
const SPEC_FIELDS_FALLBACK = [
  "messages", "model", "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs",
  "max_tokens", "max_completion_tokens", "n", "response_format", "seed", "stop", "stream", "stream_options",
  "temperature", "top_p", "tools", "tool_choice", "reasoning_effort", "include_reasoning", "parallel_tool_calls",
  "user", "use_beam_search", "top_k", "min_p", "repetition_penalty", "length_penalty", "stop_token_ids",
  "include_stop_str_in_output", "ignore_eos", "min_tokens", "skip_special_tokens", "spaces_between_special_tokens",
  "truncate_prompt_tokens", "prompt_logprobs", "allowed_token_ids", "bad_words", "echo", "add_generation_prompt",
  "continue_final_message", "add_special_tokens", "documents", "chat_template", "chat_template_kwargs",
  "mm_processor_kwargs", "structured_outputs", "priority", "request_id", "return_tokens_as_token_ids",
  "return_token_ids", "cache_salt", "kv_transfer_params", "engine_xargs", "repetition_detection",
];

/** Field names from the first column of the spec's "Chat completion request" table. */
function specRequestFields(): string[] {
  if (!existsSync(SPEC)) return SPEC_FIELDS_FALLBACK;
  const text = readFileSync(SPEC, "utf8");
  const section = text.split(/^### /m).find((s) => s.startsWith("Chat completion request"));
  if (!section) throw new Error("the spec has no 'Chat completion request' section");
  return section
    .split("\n")
    .filter((line) => line.startsWith("| ") && !line.startsWith("| Field") && !line.startsWith("|---"))
    .map((line) => line.split("|")[1]!.trim());
}

type Json = { [k: string]: unknown };

describe("buildOpenApiDocument", () => {
  const doc = buildOpenApiDocument() as Json;
  const schemas = (doc.components as Json).schemas as Json;
  const request = schemas.ChatCompletionRequest as Json;
  const properties = request.properties as Json;

  it("is OpenAPI 3.1 with bearer auth, and x-api-key on the Messages routes only", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect((doc.components as Json).securitySchemes).toEqual({
      bearerAuth: { type: "http", scheme: "bearer", description: expect.any(String) },
      apiKeyHeader: { type: "apiKey", in: "header", name: "x-api-key", description: expect.any(String) },
    });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    const paths = doc.paths as Record<string, Record<string, Json>>;
    const withApiKey = Object.entries(paths)
      .filter(([, ops]) =>
        Object.values(ops).some((op) => JSON.stringify(op.security ?? []).includes("apiKeyHeader")),
      )
      .map(([path]) => path);
    expect(withApiKey).toEqual(["/v1/messages", "/v1/messages/count_tokens"]);
  });

  it("lists every request field of the spec's table", () => {
    const fields = specRequestFields();
    expect(fields.length).toBeGreaterThanOrEqual(SPEC_FIELDS_FALLBACK.length);
    const missing = fields.filter((f) => !(f in properties));
    expect(missing).toEqual([]);
  });

  it("the request schema is the validation schema's own", () => {
    expect(request).toEqual(JSON.parse(JSON.stringify(chatCompletionRequestSchema.jsonSchema())));
    expect(request.required).toEqual(["messages", "model"]);
    expect(request.additionalProperties).toBe(false);
  });

  it("documents types, defaults and ranges from the validators", () => {
    expect(properties.seed).toMatchObject({ type: ["integer", "null"], format: "int64" });
    expect(JSON.stringify(properties.seed)).toContain('"maximum":9223372036854776000');
    expect(properties.temperature).toMatchObject({ type: ["number", "null"], minimum: 0, maximum: 2 });
    expect(properties.top_p).toMatchObject({ exclusiveMinimum: 0, maximum: 1 });
    expect(properties.n).toMatchObject({ type: ["integer", "null"], minimum: 1, default: 1 });
    expect(properties.add_generation_prompt).toMatchObject({ type: "boolean", default: true });
    expect(properties.max_tokens).toMatchObject({ deprecated: true });
    expect(properties.tool_choice).toMatchObject({ default: "none" });
    expect(properties.truncate_prompt_tokens).toMatchObject({ minimum: -1, format: "int64" });
    expect((properties.stream_options as Json).anyOf ?? properties.stream_options).toBeDefined();
  });

  it("documents the Messages output_config: one format type, Anthropic's efforts", () => {
    const messages = (schemas.MessagesRequest as Json).properties as Json;
    const config = JSON.stringify(messages.output_config);
    for (const part of ['"json_schema"', '"effort"', '"xhigh"', '"max"']) expect(config).toContain(part);
    // count_tokens takes it too (the SDK sends it there).
    expect(((schemas.CountTokensRequest as Json).properties as Json).output_config).toEqual(
      messages.output_config,
    );
  });

  it("bounds what the server bounds: project headers, the after cursor, truncate_prompt_tokens, integers", () => {
    const chat = ((doc.paths as Json)["/v1/chat/completions"] as Json).post as Json;
    const header = (name: string) =>
      new RegExp(
        ((chat.parameters as Json[]).find((p) => p.name === name)!.schema as Json).pattern as string,
      );
    const accepts = (parse: () => unknown) => {
      try {
        parse();
        return true;
      } catch {
        return false;
      }
    };
    const values = [
      "acme/search",
      "a/b",
      "..a/b..",
      "./p",
      "t/..",
      "a/b/c",
      "acme",
      "",
      "proj_abc123",
      " x",
      "t/p ",
      `${"t".repeat(64)}/p`,
      `${"t".repeat(65)}/p`,
      "p".repeat(256),
      "p".repeat(257),
      "ác/me",
      "a b/c",
    ];
    for (const v of values) {
      expect(header("Compat-Project").test(v), v).toBe(accepts(() => parseProjectHeader(v)));
      expect(header("OpenAI-Project").test(v), v).toBe(accepts(() => parseOpenAIProjectHeader(v)));
    }
    const list = ((doc.paths as Json)["/v1/preview/models/{model_id}/checkpoints"] as Json).get as Json;
    const after = (list.parameters as Json[]).find((p) => p.name === "after")!;
    expect(after.schema).toMatchObject({ minLength: 1 });
    expect(properties.truncate_prompt_tokens).toMatchObject({ not: { const: 0 } });
    expect(properties.top_k).toMatchObject({ maximum: Number.MAX_SAFE_INTEGER });
  });

  it("has the endpoints with their parameters", () => {
    const paths = doc.paths as Json;
    expect(Object.keys(paths)).toEqual(
      expect.arrayContaining([
        "/v1/chat/completions",
        "/v1/models",
        "/v1/preview/models/{model_id}/checkpoints",
        "/health",
      ]),
    );
    const list = (paths["/v1/preview/models/{model_id}/checkpoints"] as Json).get as Json;
    const params = list.parameters as Json[];
    expect(params.map((p) => p.name)).toEqual(["model_id", "after", "limit", "order"]);
    expect(params[2]!.schema).toEqual({ type: "integer", minimum: 1, maximum: 100, default: 20 });
    expect(params[3]!.schema).toEqual({ type: "string", enum: ["asc", "desc"], default: "asc" });
    expect(((paths["/health"] as Json).get as Json).security).toEqual([]);
  });

  it("describes responses and errors", () => {
    for (const name of [
      "ChatCompletionResponse",
      "ChatCompletionChunk",
      "ModelList",
      "CheckpointList",
      "Error",
    ])
      expect(schemas[name]).toBeDefined();
    expect((schemas.ChatCompletionResponse as Json).required).toEqual(["model", "choices", "usage"]);
  });

  it("contains only resolvable $refs and no undefined values", () => {
    const text = JSON.stringify(doc);
    for (const m of text.matchAll(/"\$ref":"#\/components\/schemas\/(\w+)"/g))
      expect(schemas[m[1]!]).toBeDefined();
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === "object")
        for (const x of Object.values(v)) {
          expect(x).not.toBeUndefined();
          walk(x);
        }
    };
    walk(doc);
  });
});
