/**
 * Shared pieces of the raw-HTTP contract tests: an in-process server over a temporary models
 * directory, fetch helpers that keep status, headers and body together, an SSE reader, and model
 * directory builders (synthetic weights, metadata-only models and checkpoints).
 */

import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import type { Logger } from "../../src/observability/logger.ts";
import { type RunningServer, SERVER_DEFAULTS, type ServerConfig, startServer } from "../../src/server.ts";
import { repoRoot } from "../../src/util/paths.ts";
import { buildSyntheticModel, SYNTHETIC_CHAT_TEMPLATE } from "../fixtures/synthetic-model.ts";

/**
 * The chat request's fields, in the schema's order: the service spec's table, and vLLM's
 * thinking_token_budget beside the other reasoning fields.
 */
export const SPEC_REQUEST_FIELDS = [
  "messages",
  "model",
  "frequency_penalty",
  "presence_penalty",
  "logit_bias",
  "logprobs",
  "top_logprobs",
  "max_tokens",
  "max_completion_tokens",
  "n",
  "response_format",
  "seed",
  "stop",
  "stream",
  "stream_options",
  "temperature",
  "top_p",
  "tools",
  "tool_choice",
  "reasoning_effort",
  "include_reasoning",
  "thinking_token_budget",
  "parallel_tool_calls",
  "user",
  "use_beam_search",
  "top_k",
  "min_p",
  "repetition_penalty",
  "length_penalty",
  "stop_token_ids",
  "include_stop_str_in_output",
  "ignore_eos",
  "min_tokens",
  "skip_special_tokens",
  "spaces_between_special_tokens",
  "truncate_prompt_tokens",
  "prompt_logprobs",
  "allowed_token_ids",
  "bad_words",
  "echo",
  "add_generation_prompt",
  "continue_final_message",
  "add_special_tokens",
  "documents",
  "chat_template",
  "chat_template_kwargs",
  "mm_processor_kwargs",
  "structured_outputs",
  "priority",
  "request_id",
  "return_tokens_as_token_ids",
  "return_token_ids",
  "cache_salt",
  "kv_transfer_params",
  "engine_xargs",
  "repetition_detection",
] as const;

/** The synthetic model's context (the server is started with maxModelLen 256 too). */
export const CONTEXT = 256;

export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
};

export interface Harness {
  url: string;
  /** The bootstrap key the server announced. */
  key: string;
  server: RunningServer;
  root: string;
  modelsDir: string;
  /** Closes the server (if still open) and removes the temporary directory. */
  dispose(): Promise<void>;
}

/**
 * Starts a server over a fresh temporary models directory. `prepare` fills the directory first
 * (build models, write checkpoints); `config` overrides server settings.
 */
export async function startHarness(
  prepare: (modelsDir: string, root: string) => Promise<void> | void,
  config: Partial<ServerConfig> = {},
): Promise<Harness> {
  const root = mkdtempSync(join(tmpdir(), "ortserve-http-"));
  const modelsDir = join(root, "models");
  mkdirSync(modelsDir);
  await prepare(modelsDir, root);
  let key = "";
  const server = await startServer({
    ...SERVER_DEFAULTS,
    host: "127.0.0.1",
    port: 0,
    modelsDir,
    dbPath: join(root, "ortserve.db"),
    threads: 1,
    maxNumSeqs: 4,
    maxModelLen: CONTEXT,
    // Listing-only models hold placeholder files; tests of the start-time file check turn it on.
    checkModelFiles: false,
    logger: silentLogger,
    announceKey: (k) => {
      key = k;
    },
    ...config,
  });
  expect(key).toMatch(/^osk-/);
  let closed = false;
  return {
    url: server.url,
    key,
    server,
    root,
    modelsDir,
    async dispose() {
      if (!closed) {
        closed = true;
        await server.close();
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The repository's default model, served as set up (`models/`), with room for long prompts. */
export const DEFAULT_MODEL = "smollm2-135m-instruct";

/** Starts a server over the repository's models directory (the real default model). */
export function startDefaultModelHarness(config: Partial<ServerConfig> = {}): Promise<Harness> {
  return startHarness(() => undefined, { modelsDir: join(repoRoot, "models"), maxModelLen: 4096, ...config });
}

/** Builds the synthetic model (fp32) as `<modelsDir>/<id>`; `settings` becomes its ortserve.json. */
export async function addSyntheticModel(
  modelsDir: string,
  id: string,
  settings?: Record<string, unknown>,
): Promise<string> {
  const { modelDir } = await buildSyntheticModel(modelsDir, ["fp32"], id);
  if (settings) writeFileSync(join(modelDir, "ortserve.json"), JSON.stringify(settings));
  return modelDir;
}

/**
 * A model directory the registry lists but that holds no real weights (an empty ONNX file): enough
 * for listings, never loaded.
 */
/** The synthetic template, with a line more when reasoning_effort is high. */
export const EFFORT_TEMPLATE = `{% if reasoning_effort == "high" %}{{ '<|im_start|>system\\nThink hard, think long, think well.<|im_end|>\\n' }}{% endif %}${SYNTHETIC_CHAT_TEMPLATE}`;

/** A harness serving "tiny" (a template that reads no reasoning_effort) and "thinker" (EFFORT_TEMPLATE). */
export function startEffortHarness(): Promise<Harness> {
  return startHarness(async (models) => {
    await addSyntheticModel(models, "tiny");
    const dir = await addSyntheticModel(models, "thinker");
    writeFileSync(join(dir, "chat_template.jinja"), EFFORT_TEMPLATE);
  });
}

export function addListingOnlyModel(modelsDir: string, id: string): string {
  const dir = join(modelsDir, id);
  mkdirSync(join(dir, "onnx"), { recursive: true });
  writeFileSync(join(dir, "config.json"), JSON.stringify({ model_type: "llama", vocab_size: 269 }));
  writeFileSync(join(dir, "onnx", "model.onnx"), "");
  return dir;
}

export interface CheckpointSpec {
  id: string;
  step: number;
  metrics: Record<string, number>;
}

/** Writes a metadata-only checkpoint (`checkpoints/<dirName>/checkpoint.json`). */
export function writeCheckpointMeta(modelDir: string, dirName: string, meta: CheckpointSpec): void {
  const dir = join(modelDir, "checkpoints", dirName);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "checkpoint.json"), JSON.stringify(meta));
}

export function newCheckpoint(step: number): CheckpointSpec {
  return { id: randomUUID(), step, metrics: { loss: 1 / (step + 1), accuracy: step / 1000 } };
}

// ---- requests ----

export interface Reply<T = unknown> {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: T;
}

export async function reply<T = unknown>(res: Response): Promise<Reply<T>> {
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json: json as T };
}

export function bearer(h: Harness): Record<string, string> {
  return { Authorization: `Bearer ${h.key}` };
}

/** GET with the harness key (unless headers override it). */
export async function get<T = unknown>(
  h: Harness,
  path: string,
  headers: Record<string, string> = bearer(h),
): Promise<Reply<T>> {
  return reply<T>(await fetch(`${h.url}${path}`, { headers }));
}

/**
 * POST /v1/chat/completions. `body` is serialised with JSON.stringify unless it is a string, which
 * is sent as is (exact 64-bit integers, invalid JSON).
 */
export async function chat<T = unknown>(
  h: Harness,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Reply<T>> {
  const res = await fetch(`${h.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...bearer(h), ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return reply<T>(res);
}

/** A small valid request on the synthetic model: one user message, at most `max_tokens` tokens. */
export function tinyRequest(
  overrides: Record<string, unknown> = {},
  model = "tiny",
): Record<string, unknown> {
  return { model, messages: [{ role: "user", content: "hi" }], max_tokens: 1, ...overrides };
}

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** Asserts an OpenAI error body with exactly its four fields and the given status (and param). */
export function expectApiError(
  r: Reply,
  status: number,
  expected: { param?: string | null; type?: string; code?: string; message?: RegExp } = {},
): ErrorBody["error"] {
  expect(r.status, r.text).toBe(status);
  expect(r.headers.get("content-type")).toMatch(/^application\/json/);
  const body = r.json as ErrorBody;
  expect(Object.keys(body)).toEqual(["error"]);
  expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(typeof body.error.message).toBe("string");
  expect(body.error.message.length).toBeGreaterThan(0);
  expect(typeof body.error.type).toBe("string");
  if (expected.param !== undefined) expect(body.error.param, body.error.message).toBe(expected.param);
  if (expected.type !== undefined) expect(body.error.type).toBe(expected.type);
  if (expected.code !== undefined) expect(body.error.code).toBe(expected.code);
  if (expected.message !== undefined) expect(body.error.message).toMatch(expected.message);
  return body.error;
}

// ---- server-sent events ----

export interface SseStream {
  /** Parsed `data:` payloads before `[DONE]`, in order. */
  events: Record<string, unknown>[];
  /** True when the stream ended with `data: [DONE]`. */
  done: boolean;
}

/** Parses a complete SSE body: `data: <json>` events separated by blank lines. */
export function parseSse(text: string): SseStream {
  const events: Record<string, unknown>[] = [];
  let done = false;
  for (const block of text.split("\n\n")) {
    if (block.trim() === "") continue;
    expect(done, "nothing may follow [DONE]").toBe(false);
    expect(block.startsWith("data: "), block).toBe(true);
    const data = block.slice("data: ".length);
    if (data === "[DONE]") done = true;
    else events.push(JSON.parse(data) as Record<string, unknown>);
  }
  return { events, done };
}

/** POST a streaming request and read the whole event stream. */
export async function chatStream(
  h: Harness,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<Reply & SseStream> {
  const r = await chat(h, { ...body, stream: true }, headers);
  expect(r.status, r.text).toBe(200);
  expect(r.headers.get("content-type")).toMatch(/^text\/event-stream/);
  return { ...r, ...parseSse(r.text) };
}
