/**
 * One streaming client load for any OpenAI-compatible server, through the official `openai`
 * client: N concurrent chat completions (stream: true, temperature 0, max_tokens, EOS ignored via
 * `ignore_eos`, which ortserve and llama-server both accept), one distinct prompt each.
 * Aggregate = completion tokens of all streams / wall time from the first request to the last
 * chunk; completion tokens come from the streamed usage (ortserve: stream_options.include_usage;
 * llama-server always puts usage on its last chunk), else the count of content chunks.
 */
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
}

export function openAiClient(baseURL: string, apiKey = "none"): OpenAI {
  return new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 600_000 });
}

async function oneStream(client: OpenAI, opts: LoadOptions, i: number): Promise<StreamResult> {
  const body = {
    model: opts.model,
    messages: [{ role: "user" as const, content: opts.prompts[i]! }],
    stream: true as const,
    stream_options: { include_usage: true },
    temperature: 0,
    max_tokens: opts.maxTokens ?? 128,
    ignore_eos: true,
    ...opts.extraBody?.(i),
  };
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

/** Runs all prompts at once, one stream each. */
export async function httpLoad(opts: LoadOptions): Promise<LoadResult> {
  const client = openAiClient(opts.baseURL, opts.apiKey);
  const t0 = nowSeconds();
  const results = await Promise.all(opts.prompts.map((_, i) => oneStream(client, opts, i)));
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
