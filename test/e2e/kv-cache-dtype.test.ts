/**
 * End to end: `ortserve serve --kv-cache-dtype int8` on the real default model, driven by the
 * official `openai` client. The 8-bit cache is what the server runs (its /metrics says so), and it
 * serves as the default cache does: streamed and whole answers, prefix-cache hits that change
 * nothing in a greedy reply.
 */
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readModelConfig } from "../../src/core/model/model-config.ts";
import { nativeSessions } from "../../src/core/runner/native-session.ts";
import {
  type DefaultModelServer,
  haveDefaultModel,
  DEFAULT_MODEL as MODEL,
  defaultModelDir as realModelDir,
  startDefaultModelServer,
} from "./server-process.ts";

const KEY = "e2e-kv-int8-key-0123456789";

describe.skipIf(!haveDefaultModel || !nativeSessions)("serve --kv-cache-dtype int8", () => {
  let served: DefaultModelServer;
  let client: OpenAI;

  beforeAll(async () => {
    served = await startDefaultModelServer({
      prefix: "ortserve-e2e-int8-",
      apiKey: KEY,
      extraArgs: ["--kv-cache-dtype", "int8"],
    });
    client = served.client;
  });

  afterAll(async () => {
    await served?.close();
  });

  const question = {
    model: MODEL,
    messages: [
      { role: "system" as const, content: "You are a helpful assistant who answers in full sentences." },
      { role: "user" as const, content: "Name three things a lighthouse keeper does every day." },
    ],
    max_completion_tokens: 40,
    temperature: 0,
  };

  it("answers whole and streamed, the same greedy text, the second time from the prefix cache", async () => {
    const whole = await client.chat.completions.create(question);
    const text = whole.choices[0]!.message.content!;
    expect(text.length).toBeGreaterThan(20);
    expect(whole.usage!.completion_tokens).toBeGreaterThan(5);

    const stream = await client.chat.completions.create({
      ...question,
      stream: true,
      stream_options: { include_usage: true },
    });
    let streamed = "";
    let cached: number | undefined;
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) cached = chunk.usage.prompt_tokens_details?.cached_tokens;
    }
    expect(streamed).toBe(text);
    expect(cached).toBeGreaterThan(0);
  });

  it("runs the 8-bit cache: /metrics reports it, head_dim bytes and 2 per 32 for each KV head and layer", async () => {
    const { numLayers, numKvHeads, headDim } = readModelConfig(realModelDir).decoder;
    const metrics = await (await fetch(`${served.server.url}/metrics`)).text();
    const line = metrics.split("\n").find((l) => l.startsWith("ortserve_cache_config_info{"));
    expect(line).toContain('cache_dtype="int8"');
    expect(line).toContain(`bytes_per_token="${numLayers * 2 * numKvHeads * (headDim + headDim / 16)}"`);
    // The q4 projections in ortserve's kernel where the CPU runs one: the one this process's native
    // session picked from the same environment (the fastest, unless ORTSERVE_BLOCK_QUANT_MATMUL
    // names another).
    const kernel = nativeSessions!.blockQuantMatMulKernel();
    const runtime = metrics.split("\n").find((l) => l.startsWith("ortserve_runtime_info{"));
    expect(runtime).toContain('attention="ortserve"');
    if (nativeSessions!.blockQuantMatMul) {
      expect(runtime).toContain('projections="ortserve.BlockQuantMatMul"');
      expect(runtime).toContain(`projection_kernel="${kernel}"`);
      // The packed weights' bytes: what the resident weights are once the file's pages are given back.
      const packed = metrics.split("\n").find((l) => l.startsWith("ortserve_packed_weight_bytes{"));
      expect(Number(packed?.split(" ").at(-1))).toBeGreaterThan(0);
    } else {
      expect(runtime).toContain('projections="MatMulNBits"');
      expect(metrics).not.toContain("ortserve_packed_weight_bytes{");
    }
  });
});
