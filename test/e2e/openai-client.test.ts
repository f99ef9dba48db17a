/**
 * End to end: a real server process, the real default model (and a synthetic one with
 * checkpoints), driven by the official `openai` client.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SEMI_SPACE_MIB } from "../../src/cli/young-generation.ts";
import { addCheckpoint } from "../../src/models/checkpoint-install.ts";
import { modelsDir as defaultModelsDir } from "../../src/util/paths.ts";
import { buildSyntheticModel, writeSyntheticGguf } from "../fixtures/synthetic-model.ts";
import { type ServerProcess, startServerProcess } from "./server-process.ts";

const MODEL = "smollm2-135m-instruct";
const realModelDir = join(defaultModelsDir(), MODEL);
const haveModel = existsSync(join(realModelDir, "onnx", "model_q4.onnx"));
const KEY = "e2e-test-key-0123456789";

describe.skipIf(!haveModel)("OpenAI client against a real ortserve process", () => {
  let root: string;
  let server: ServerProcess;
  let client: OpenAI;
  let dbPath: string;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "ortserve-e2e-"));
    const models = join(root, "models");
    mkdirSync(models);
    symlinkSync(realModelDir, join(models, MODEL), "dir");
    await buildSyntheticModel(models, ["fp32"], "tiny");
    for (const step of [10, 20]) {
      const gguf = writeSyntheticGguf(join(root, `tiny-${step}.gguf`), step);
      await addCheckpoint({
        modelId: "tiny",
        ggufPath: gguf,
        step,
        metrics: { loss: 3 - step / 10 },
        modelsDir: models,
        format: "fp32",
      });
    }
    dbPath = join(root, "ortserve.db");
    server = await startServerProcess({ modelsDir: models, dbPath, apiKey: KEY });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
  });

  afterAll(async () => {
    await server?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it("runs with the young generation capped, in the process it was started as", () => {
    // `serve` re-executes itself with --max-semi-space-size (src/cli/young-generation.ts); the pid stays.
    const argv = readFileSync(`/proc/${server.child.pid}/cmdline`, "utf8").split("\0");
    expect(argv).toContain(`--max-semi-space-size=${SEMI_SPACE_MIB}`);
    expect(argv).toContain("serve");
  });

  it("answers a plain chat completion with usage", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "What is the capital of France?" }],
      max_completion_tokens: 24,
    });
    expect(r.id).toMatch(/^chatcmpl-/);
    expect(r.object).toBe("chat.completion");
    expect(r.model).toBe(MODEL);
    expect(r.choices[0]!.message.role).toBe("assistant");
    expect(r.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(["stop", "length"]).toContain(r.choices[0]!.finish_reason);
    expect(r.usage!.prompt_tokens).toBeGreaterThan(10);
    expect(r.usage!.total_tokens).toBe(r.usage!.prompt_tokens + r.usage!.completion_tokens);
    // The default model has no reasoning parser: no think block, no reasoning tokens.
    expect(r.usage!.completion_tokens_details?.reasoning_tokens).toBe(0);
  });

  it("streams: role chunk first, content deltas, a finish chunk and a usage chunk", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Count to five." }],
      max_completion_tokens: 16,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text.length).toBeGreaterThan(0);
    expect(chunks.some((c) => c.choices[0]?.finish_reason)).toBe(true);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage!.completion_tokens).toBeGreaterThan(0);
    expect(last.usage!.completion_tokens_details?.reasoning_tokens).toBe(0);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  it("n > 1 with a seed gives n choices, reproducibly", async () => {
    const ask = () =>
      client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "Tell me a fact about cats." }],
        max_completion_tokens: 12,
        n: 2,
        temperature: 0.9,
        seed: 1234,
      });
    const [a, b] = [await ask(), await ask()];
    expect(a.choices).toHaveLength(2);
    expect(a.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(b.choices.map((c) => c.message.content)).toEqual(a.choices.map((c) => c.message.content));
    expect(a.usage!.completion_tokens).toBeGreaterThan(12);
  });

  it("returns logprobs with top alternatives and bytes", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Say hi." }],
      max_completion_tokens: 5,
      logprobs: true,
      top_logprobs: 3,
    });
    const content = r.choices[0]!.logprobs!.content!;
    expect(content.length).toBe(r.usage!.completion_tokens);
    for (const t of content) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.top_logprobs).toHaveLength(3);
      expect(Array.isArray(t.bytes)).toBe(true);
      expect(t.top_logprobs[0]!.logprob).toBeGreaterThanOrEqual(t.top_logprobs[2]!.logprob);
    }
  });

  it("cuts the output at a stop string", async () => {
    const base = {
      model: MODEL,
      messages: [{ role: "user" as const, content: "List three colors." }],
      max_completion_tokens: 30,
      temperature: 0,
    };
    const full = (await client.chat.completions.create(base)).choices[0]!.message.content!;
    const stop = full.trim().split(/\s+/)[2]!;
    const r = await client.chat.completions.create({ ...base, stop: [stop] });
    expect(r.choices[0]!.finish_reason).toBe("stop");
    expect(r.choices[0]!.message.content).toBe(full.slice(0, full.indexOf(stop)));
  });

  it("records usage under the client's project option", async () => {
    const scoped = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey: KEY,
      project: "acme/search",
      maxRetries: 0,
    });
    const r = await scoped.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hi" }],
      max_completion_tokens: 3,
    });
    const db = new DatabaseSync(dbPath, { readOnly: true });
    const row = db
      .prepare(
        "SELECT team, project, prompt_tokens, completion_tokens, status FROM usage WHERE request_id = ?",
      )
      .get(r.id.replace(/^chatcmpl-/, "")) as Record<string, unknown>;
    db.close();
    expect(row).toMatchObject({
      team: "acme",
      project: "search",
      prompt_tokens: r.usage!.prompt_tokens,
      completion_tokens: r.usage!.completion_tokens,
      status: 200,
    });
  });

  it("serves checkpoints as models and lists them with cursor pagination", async () => {
    const models = await client.models.list();
    const ids = models.data.map((m) => m.id);
    expect(ids).toEqual(expect.arrayContaining([MODEL, "tiny", "tiny:step10", "tiny:step20"]));
    const page = (await (
      await fetch(`${server.url}/v1/preview/models/tiny/checkpoints?order=desc&limit=1`, {
        headers: { Authorization: `Bearer ${KEY}` },
      })
    ).json()) as { data: { step: number; id: string }[]; has_more: boolean; last_id: string };
    expect(page.data.map((c) => c.step)).toEqual([20]);
    expect(page.has_more).toBe(true);
    const next = (await (
      await fetch(
        `${server.url}/v1/preview/models/tiny/checkpoints?order=desc&limit=1&after=${page.last_id}`,
        { headers: { Authorization: `Bearer ${KEY}` } },
      )
    ).json()) as { data: { step: number }[]; has_more: boolean };
    expect(next.data.map((c) => c.step)).toEqual([10]);
    expect(next.has_more).toBe(false);
    const r = await client.chat.completions.create({
      model: "tiny:step10",
      messages: [{ role: "user", content: "hi" }],
      max_completion_tokens: 4,
      ignore_eos: true,
    } as never);
    expect(r.model).toBe("tiny:step10");
    expect(r.usage!.completion_tokens).toBe(4);
  });

  it("raises the right APIError subclasses with the server's message", async () => {
    const bad = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "wrong", maxRetries: 0 });
    await expect(bad.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const notFound = client.chat.completions.create({
      model: "no-such-model",
      messages: [{ role: "user", content: "x" }],
    });
    await expect(notFound).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(notFound).rejects.toThrow(/no-such-model/);
    const badParam = client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "x" }],
      top_p: 5,
    });
    await expect(badParam).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    await expect(badParam).rejects.toMatchObject({ param: "top_p" });
    const prio = client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "x" }],
      priority: 1,
    } as never);
    await expect(prio).rejects.toMatchObject({ status: 400, param: "priority" });
  });

  it("a client that disconnects mid-stream cancels its generation", async () => {
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      {
        model: MODEL,
        messages: [{ role: "user", content: "Write a long story." }],
        max_completion_tokens: 2000,
        stream: true,
        ignore_eos: true,
      } as never,
      { signal: controller.signal },
    );
    let got = 0;
    try {
      for await (const _ of stream as unknown as AsyncIterable<unknown>) {
        if (++got === 3) controller.abort();
      }
    } catch {
      // aborted
    }
    // The engine frees the slot: a metrics scrape soon shows nothing running.
    let running = -1;
    for (let i = 0; i < 50 && running !== 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const text = await (await fetch(`${server.url}/metrics`)).text();
      running = [...text.matchAll(/^ortserve_running_sequences\{[^}]*\} (\d+)/gm)].reduce(
        (s, m) => s + Number(m[1]),
        0,
      );
    }
    expect(running).toBe(0);
    const db = new DatabaseSync(dbPath, { readOnly: true });
    const row = db.prepare("SELECT status, completion_tokens FROM usage ORDER BY id DESC LIMIT 1").get() as {
      status: number;
      completion_tokens: number;
    };
    db.close();
    expect(row.status).toBe(499);
    expect(row.completion_tokens).toBeLessThan(2000);
  });
});
