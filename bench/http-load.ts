/**
 * One streaming client load for any OpenAI-compatible server, through the official `openai`
 * client: N concurrent chat completions (stream: true, temperature 0, max_tokens, EOS ignored via
 * `ignore_eos`, which ortserve and llama-server both accept), one distinct prompt each.
 * Aggregate = completion tokens of all streams / wall time from the first request to the last
 * chunk; completion tokens come from the streamed usage (ortserve: stream_options.include_usage;
 * llama-server always puts usage on its last chunk), else the count of content chunks.
 */
import { request } from "node:http";
import OpenAI from "openai";
import { median, nowSeconds } from "./stats.ts";

export interface StreamResult {
  /** Seconds from sending the request to the first chunk with content. */
  ttft: number;
  completionTokens: number;
  promptTokens: number | undefined;
  contentChunks: number;
  /** Whether completionTokens came from the server's usage. */
  fromUsage: boolean;
}

export interface LoadResult {
  streams: number;
  seconds: number;
  /** Completion tokens of all streams per second of wall time. */
  tokensPerSecond: number;
  medianTtft: number;
  maxTtft: number;
  results: StreamResult[];
}

export interface LoadOptions {
  baseURL: string;
  apiKey?: string;
  model: string;
  prompts: string[];
  maxTokens?: number;
  /** Extra body fields for request i (e.g. a cache_salt, cache_prompt: false). */
  extraBody?: (i: number) => Record<string, unknown>;
  /** Read the streams with oneStreamMinimal instead of the official client. */
  minimal?: boolean;
}

export function openAiClient(baseURL: string, apiKey = "none"): OpenAI {
  return new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 600_000 });
}

/** Request i's body: the same for the official client and the minimal reader. */
function streamBody(opts: LoadOptions, i: number) {
  return {
    model: opts.model,
    messages: [{ role: "user" as const, content: opts.prompts[i]! }],
    stream: true as const,
    stream_options: { include_usage: true },
    temperature: 0,
    max_tokens: opts.maxTokens ?? 128,
    ignore_eos: true,
    ...opts.extraBody?.(i),
  };
}

async function oneStream(client: OpenAI, opts: LoadOptions, i: number): Promise<StreamResult> {
  const body = streamBody(opts, i);
  const t0 = nowSeconds();
  let ttft = 0;
  let contentChunks = 0;
  let usage: { completion_tokens: number; prompt_tokens: number } | undefined;
  const stream = await client.chat.completions.create(body);
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices[0]?.delta?.content) {
      if (contentChunks === 0) ttft = nowSeconds() - t0;
      contentChunks++;
    }
  }
  return {
    ttft,
    completionTokens: usage?.completion_tokens ?? contentChunks,
    promptTokens: usage?.prompt_tokens,
    contentChunks,
    fromUsage: usage !== undefined,
  };
}

/**
 * One stream read with as little client work as possible: node:http, no SSE parsing, no JSON per
 * chunk; the bytes are only searched for the usage's completion_tokens (a field on the last
 * chunk). It tells what the server's streaming costs apart from what the client spends on it.
 */
function oneStreamMinimal(opts: LoadOptions, i: number): Promise<StreamResult> {
  const url = new URL(`${opts.baseURL.replace(/\/$/, "")}/chat/completions`);
  const headers = { "content-type": "application/json", authorization: `Bearer ${opts.apiKey ?? "none"}` };
  const t0 = nowSeconds();
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", headers }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`HTTP ${res.statusCode} from ${url}`));
        res.resume();
        return;
      }
      let ttft = 0;
      let tail = "";
      res.setEncoding("utf8");
      res.on("data", (text: string) => {
        if (ttft === 0) ttft = nowSeconds() - t0;
        // The usage chunk is the last but [DONE]; a field split across reads is in the joined tail.
        tail = (tail + text).slice(-1024);
      });
      res.on("end", () => {
        const completion = /"completion_tokens":(\d+)/.exec(tail);
        const prompt = /"prompt_tokens":(\d+)/.exec(tail);
        if (!completion) reject(new Error("the stream ended without usage"));
        else
          resolve({
            ttft,
            completionTokens: Number(completion[1]),
            promptTokens: prompt ? Number(prompt[1]) : undefined,
            contentChunks: 0,
            fromUsage: true,
          });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(JSON.stringify(streamBody(opts, i)));
  });
}

/**
 * Runs all prompts at once, one stream each: through the official `openai` client, or with
 * `minimal`, through oneStreamMinimal (whose ttft is the first byte's, content or not).
 */
export async function httpLoad(opts: LoadOptions): Promise<LoadResult> {
  const client = openAiClient(opts.baseURL, opts.apiKey);
  const t0 = nowSeconds();
  const results = await Promise.all(
    opts.prompts.map((_, i) => (opts.minimal ? oneStreamMinimal(opts, i) : oneStream(client, opts, i))),
  );
  const seconds = nowSeconds() - t0;
  const ttfts = results.map((r) => r.ttft);
  return {
    streams: opts.prompts.length,
    seconds,
    tokensPerSecond: results.reduce((s, r) => s + r.completionTokens, 0) / seconds,
    medianTtft: median(ttfts),
    maxTtft: Math.max(...ttfts),
    results,
  };
}
