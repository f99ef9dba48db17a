/**
 * End to end for POST /v1/completions: a real server process on the real default model, driven by
 * the official `openai` client (client.completions.create), and the scoring path checked against
 * the in-process Engine.score on the same text.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { modelsDir as defaultModelsDir } from "../../src/util/paths.ts";
import { type ServerProcess, startServerProcess } from "./server-process.ts";

const MODEL = "smollm2-135m-instruct";
const realModelDir = join(defaultModelsDir(), MODEL);
const haveModel = existsSync(join(realModelDir, "onnx", "model_q4.onnx"));
const KEY = "e2e-completions-key-0123456789";

/** The legacy logprobs object as the server sends it (the client's type leaves fields optional). */
interface Legacy {
  tokens: string[];
  token_logprobs: (number | null)[];
  top_logprobs: (Record<string, number> | null)[];
  text_offset: number[];
}

describe.skipIf(!haveModel)("POST /v1/completions through the openai client", () => {
  let root: string;
  let models: string;
  let server: ServerProcess;
  let client: OpenAI;
  let dbPath: string;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "ortserve-e2e-cmpl-"));
    models = join(root, "models");
    mkdirSync(models);
    symlinkSync(realModelDir, join(models, MODEL), "dir");
    dbPath = join(root, "ortserve.db");
    server = await startServerProcess({ modelsDir: models, dbPath, apiKey: KEY });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
  });

  afterAll(async () => {
    await server?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it("continues a text prompt, with usage, and records a usage row", async () => {
    const r = await client.completions.create({
      model: MODEL,
      prompt: "The capital of France is",
      max_tokens: 6,
      temperature: 0,
    });
    expect(r.id).toMatch(/^cmpl-/);
    expect(r.object).toBe("text_completion");
    expect(r.model).toBe(MODEL);
    expect(r.choices).toHaveLength(1);
    expect(r.choices[0]!.text.length).toBeGreaterThan(0);
    expect(r.choices[0]!.logprobs).toBeNull();
    expect(r.usage).toMatchObject({
      completion_tokens: r.choices[0]!.finish_reason === "length" ? 6 : expect.any(Number),
    });
    expect(r.usage!.total_tokens).toBe(r.usage!.prompt_tokens + r.usage!.completion_tokens);

    const db = new DatabaseSync(dbPath, { readOnly: true });
    const row = db
      .prepare("SELECT model, prompt_tokens, completion_tokens, status FROM usage WHERE request_id = ?")
      .get(r.id.replace(/^cmpl-/, "")) as Record<string, unknown>;
    db.close();
    expect(row).toEqual({
      model: MODEL,
      prompt_tokens: r.usage!.prompt_tokens,
      completion_tokens: r.usage!.completion_tokens,
      status: 200,
    });
  });

  it("gives each prompt of a batch its own n choices, indexed prompt × n + i", async () => {
    const prompts = ["Once upon a time", "def fibonacci(n):", "Roses are red,"];
    const r = await client.completions.create({
      model: MODEL,
      prompt: prompts,
      n: 2,
      max_tokens: 4,
      temperature: 0.8,
      seed: 7,
      echo: true,
    });
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2, 3, 4, 5]);
    r.choices.forEach((c, i) => {
      expect(c.text.startsWith(prompts[Math.floor(i / 2)]!)).toBe(true);
    });
    // Each prompt's tokens are counted once, its choices' tokens each.
    const single = await client.completions.create({ model: MODEL, prompt: prompts[0]!, max_tokens: 1 });
    expect(r.usage!.prompt_tokens).toBeGreaterThan(single.usage!.prompt_tokens);
    expect(r.usage!.completion_tokens).toBeLessThanOrEqual(24);
    expect(r.usage!.completion_tokens).toBeGreaterThanOrEqual(6);
  });

  it("takes token-id prompts and echoes their decoded text", async () => {
    const scored = await client.completions.create({
      model: MODEL,
      prompt: "Hello world",
      max_tokens: 0,
      echo: true,
      // vLLM's extra field: sent as is in the body.
      return_token_ids: true,
    } as OpenAI.CompletionCreateParamsNonStreaming);
    const ids = (scored.choices[0] as unknown as { prompt_token_ids: number[] }).prompt_token_ids;
    expect(ids.length).toBeGreaterThan(1);
    const r = await client.completions.create({
      model: MODEL,
      prompt: [ids, ids],
      max_tokens: 2,
      temperature: 0,
      echo: true,
    });
    expect(r.choices).toHaveLength(2);
    expect(r.choices[0]!.text.startsWith("Hello world")).toBe(true);
    expect(r.choices[1]!.text).toBe(r.choices[0]!.text);
  });

  it("echo + logprobs + max_tokens 0 scores the text exactly as Engine.score does", async () => {
    const text = "The quick brown fox jumps over the lazy dog.";
    const r = await client.completions.create({
      model: MODEL,
      prompt: text,
      max_tokens: 0,
      echo: true,
      logprobs: 2,
    });
    const c = r.choices[0]!;
    expect(c.text).toBe(text);
    expect(c.finish_reason).toBe("length");
    expect(r.usage!.completion_tokens).toBe(0);
    const lp = c.logprobs as unknown as Legacy;
    expect(lp.tokens.join("")).toBe(text);
    expect(lp.token_logprobs[0]).toBeNull();
    expect(lp.top_logprobs[0]).toBeNull();
    expect(lp.text_offset[0]).toBe(0);
    for (let i = 1; i < lp.tokens.length; i++) {
      expect(lp.text_offset[i]).toBe(lp.text_offset[i - 1]! + lp.tokens[i - 1]!.length);
      // The token itself plus up to 2 alternatives, the token's own logprob among them.
      const top = lp.top_logprobs[i]!;
      expect(Object.keys(top).length).toBeLessThanOrEqual(3);
      expect(top[lp.tokens[i]!]).toBe(lp.token_logprobs[i]);
    }

    const engine = await Engine.open({ modelsDir: models, workers: 1, threads: 1 });
    try {
      const score = await engine.score({ model: MODEL, prompt: { text } });
      expect(score.promptTokenIds).toHaveLength(lp.tokens.length);
      const own = score.promptLogprobs.map((p) => (p ? p.entries[0]!.logprob : null));
      expect(own[0]).toBeNull();
      for (let i = 1; i < own.length; i++) expect(lp.token_logprobs[i]).toBeCloseTo(own[i]!, 4);
      const total = (xs: (number | null)[]) => xs.reduce<number>((s, x) => s + (x ?? 0), 0);
      expect(total(lp.token_logprobs)).toBeCloseTo(total(own), 3);
    } finally {
      await engine.close();
    }
  });

  it("streams text_completion chunks that add up to the non-streamed text", async () => {
    const base = { model: MODEL, prompt: "Water boils at", max_tokens: 8, temperature: 0 };
    const whole = await client.completions.create(base);
    const stream = await client.completions.create({
      ...base,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.every((c) => c.object === "text_completion")).toBe(true);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    const text = chunks.map((c) => c.choices[0]?.text ?? "").join("");
    expect(text).toBe(whole.choices[0]!.text);
    expect(chunks.some((c) => c.choices[0]?.finish_reason === whole.choices[0]!.finish_reason)).toBe(true);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ completion_tokens: whole.usage!.completion_tokens });
  });

  it("refuses suffix and an unsupported best_of with a 400 naming the field, and needs a key", async () => {
    for (const [extra, param] of [
      [{ suffix: "!" }, "suffix"],
      [{ best_of: 3 }, "best_of"],
      [{ max_tokens: 0 }, "max_tokens"],
    ] as const) {
      const err = await client.completions.create({ model: MODEL, prompt: "Hi", ...extra }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
    }
    const anonymous = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey: "wrong-key-0000000000",
      maxRetries: 0,
    });
    await expect(anonymous.completions.create({ model: MODEL, prompt: "Hi" })).rejects.toBeInstanceOf(
      OpenAI.AuthenticationError,
    );
  });
});
