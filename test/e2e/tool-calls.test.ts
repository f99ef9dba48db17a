/**
 * Tool calls end to end: a real server process, the real default model (its ortserve.json names
 * the Hermes parser) and the official `openai` client. A named function and "required" constrain
 * the output, so the call always parses and its arguments validate against the tool's schema
 * (ajv); "auto" parses whatever the model writes; a stream's deltas reassemble to the same call.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import OpenAI from "openai";
import type { ChatCompletionTool } from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { modelsDir as defaultModelsDir } from "../../src/util/paths.ts";
import { type ServerProcess, startServerProcess } from "./server-process.ts";

const MODEL = "smollm2-135m-instruct";
/** The same weights under another id whose ortserve.json names no tool parser. */
const PLAIN = "smollm2-no-tool-parser";
const realModelDir = join(defaultModelsDir(), MODEL);
const haveModel = existsSync(join(realModelDir, "onnx", "model_q4.onnx"));
const KEY = "e2e-tool-calls-key-0123456789";

const WEATHER = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 24 },
    unit: { enum: ["celsius", "fahrenheit"] },
    days: { type: "integer", minimum: 1 },
  },
  required: ["city", "unit", "days"],
  additionalProperties: false,
};
const TIME = {
  type: "object",
  properties: { timezone: { type: "string", maxLength: 16 } },
  required: ["timezone"],
  additionalProperties: false,
};
const tools: ChatCompletionTool[] = [
  {
    type: "function",
    function: { name: "get_weather", description: "Weather forecast", parameters: WEATHER },
  },
  { type: "function", function: { name: "get_time", description: "Current time", parameters: TIME } },
];
const ajv = new Ajv2020({ strict: false });
const validators: Record<string, ReturnType<typeof ajv.compile>> = {
  get_weather: ajv.compile(WEATHER),
  get_time: ajv.compile(TIME),
};
const messages = [{ role: "user" as const, content: "What is the weather in Paris for the next 3 days?" }];

type Call = { id: string; type: string; function: { name: string; arguments: string } };

function expectValidCall(call: Call, name?: string): void {
  expect(call.type).toBe("function");
  expect(call.id).toMatch(/^call_[0-9a-f]{24}$/);
  if (name) expect(call.function.name).toBe(name);
  const validate = validators[call.function.name];
  expect(validate, call.function.name).toBeDefined();
  expect(validate!(JSON.parse(call.function.arguments)), call.function.arguments).toBe(true);
}

describe.skipIf(!haveModel)("tool calls through the OpenAI client", () => {
  let root: string;
  let server: ServerProcess;
  let strict: ServerProcess;
  let client: OpenAI;
  let strictClient: OpenAI;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "ortserve-e2e-tools-"));
    const models = join(root, "models");
    mkdirSync(models);
    symlinkSync(realModelDir, join(models, MODEL), "dir");
    const plain = join(models, PLAIN);
    mkdirSync(plain);
    for (const f of readdirSync(realModelDir))
      if (f !== "ortserve.json") symlinkSync(join(realModelDir, f), join(plain, f));
    writeFileSync(join(plain, "ortserve.json"), JSON.stringify({ id: PLAIN, format: "q4" }));
    server = await startServerProcess({ modelsDir: models, dbPath: join(root, "a.db"), apiKey: KEY });
    strict = await startServerProcess({
      modelsDir: models,
      dbPath: join(root, "b.db"),
      apiKey: KEY,
      extraArgs: ["--strict-tool-choice"],
    });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
    strictClient = new OpenAI({ baseURL: `${strict.url}/v1`, apiKey: KEY, maxRetries: 0 });
  });

  afterAll(async () => {
    await server?.stop();
    await strict?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it("a named function, n = 2: each choice is one valid call of it, finish_reason tool_calls", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages,
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
      n: 2,
      temperature: 1,
      seed: 7,
      max_completion_tokens: 120,
    });
    expect(r.choices).toHaveLength(2);
    for (const c of r.choices) {
      expect(c.finish_reason).toBe("tool_calls");
      expect(c.message.tool_calls).toHaveLength(1);
      expectValidCall(c.message.tool_calls![0] as Call, "get_weather");
      expect(c.message.content).toBeNull();
    }
  });

  it("required: at least one valid call of the given tools and no content; parallel_tool_calls=false keeps one", async () => {
    let finished = 0;
    for (const parallel of [true, false]) {
      const r = await client.chat.completions.create({
        model: MODEL,
        messages,
        tools,
        tool_choice: "required",
        parallel_tool_calls: parallel,
        temperature: 1,
        seed: 11,
        max_completion_tokens: 160,
      });
      const c = r.choices[0]!;
      if (c.finish_reason === "length") continue;
      expect(c.finish_reason).toBe("tool_calls");
      expect(c.message.tool_calls!.length).toBeGreaterThanOrEqual(1);
      if (!parallel) expect(c.message.tool_calls).toHaveLength(1);
      for (const call of c.message.tool_calls!) expectValidCall(call as Call);
      // The grammar allows only calls: no text of the call (or around it) leaks into content.
      expect(c.message.content).toBeNull();
      finished++;
    }
    expect(finished).toBeGreaterThan(0);
  });

  it("streaming: a header delta, then argument pieces that reassemble to the full response's call (same seed)", async () => {
    const params = {
      model: MODEL,
      messages,
      tools,
      tool_choice: { type: "function" as const, function: { name: "get_weather" } },
      temperature: 1,
      seed: 3,
      max_completion_tokens: 120,
    };
    const full = await client.chat.completions.create(params);
    const fullCall = full.choices[0]!.message.tool_calls![0] as Call;
    const stream = await client.chat.completions.create({ ...params, stream: true });
    const calls: { id?: string; name?: string; arguments: string }[] = [];
    let content = "";
    let finish: string | null = null;
    let argumentPieces = 0;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      content += choice.delta.content ?? "";
      for (const d of choice.delta.tool_calls ?? []) {
        calls[d.index] ??= { arguments: "" };
        const call = calls[d.index]!;
        if (d.id) call.id = d.id;
        if (d.function?.name) call.name = d.function.name;
        if (d.function?.arguments) argumentPieces++;
        call.arguments += d.function?.arguments ?? "";
      }
      finish = choice.finish_reason ?? finish;
    }
    expect(finish).toBe("tool_calls");
    expect(content).toBe("");
    expect(calls).toHaveLength(1);
    // A forced call's arguments stream as the model writes them, not in one piece at the end.
    expect(argumentPieces).toBeGreaterThan(1);
    expect(calls[0]!.id).toMatch(/^call_/);
    expect({ name: calls[0]!.name, arguments: calls[0]!.arguments }).toEqual(fullCall.function);
    expectValidCall({ id: calls[0]!.id!, type: "function", function: fullCall.function }, "get_weather");
  });

  it("auto: whatever the model writes comes back parsed, as content or calls, never an error", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages,
      tools,
      tool_choice: "auto",
      n: 3,
      temperature: 1,
      seed: 5,
      max_completion_tokens: 40,
    });
    for (const c of r.choices) {
      expect(["stop", "length", "tool_calls"]).toContain(c.finish_reason);
      if (c.finish_reason === "tool_calls")
        for (const call of c.message.tool_calls!) expect(call.type).toBe("function");
      else expect(typeof c.message.content).toBe("string");
    }
  });

  it("refusals: unknown function, unsupported parameter keyword, model without a parser, strict server", async () => {
    const bad = async (p: Promise<unknown>, param: string, text?: RegExp) => {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
      if (text) expect((err as Error).message).toMatch(text);
    };
    const base = { model: MODEL, messages, max_completion_tokens: 8 };
    await bad(
      client.chat.completions.create({
        ...base,
        tools,
        tool_choice: { type: "function", function: { name: "nope" } },
      }),
      "tool_choice.function.name",
    );
    await bad(client.chat.completions.create({ ...base, tool_choice: "required" }), "tool_choice");
    const notTool: ChatCompletionTool = {
      type: "function",
      function: { name: "f", parameters: { type: "object", not: { required: ["a"] } } },
    };
    await bad(
      client.chat.completions.create({ ...base, tools: [notTool], tool_choice: "required" }),
      "tools[0].function.parameters",
      /"f".*not/,
    );
    await bad(
      client.chat.completions.create({ ...base, model: PLAIN, tools, tool_choice: "auto" }),
      "tool_choice",
    );
    await bad(strictClient.chat.completions.create({ ...base, tools, tool_choice: "auto" }), "tool_choice");
    // "none" still works on the strict server, tools and all.
    const ok = await strictClient.chat.completions.create({ ...base, tools, tool_choice: "none" });
    expect(ok.choices[0]!.message.tool_calls ?? []).toHaveLength(0);
  });
});
