/**
 * Pieces the overload and soak runs share: one chat request over raw HTTP classified by how it
 * ended (complete, refused, cut, failed), the engine gauges from /metrics, and a server process's
 * resident memory and open file descriptors from /proc. Raw fetch rather than the openai client:
 * these runs must tell a stream that reached `data: [DONE]` from one that was cut, and read a
 * refusal's status and Retry-After as sent.
 */
import { readdirSync, readFileSync } from "node:fs";

export type Outcome =
  /** 200 with a whole body (non-streaming) or a stream that ended with [DONE] and no error event. */
  | "complete"
  /** 503 or 429 with an OpenAI error body and a Retry-After header. */
  | "refused"
  /** The client aborted it on purpose. */
  | "disconnected"
  /** Anything else: an error status, an SSE error event, a cut stream, a malformed refusal. */
  | "failed";

export interface ChatResult {
  outcome: Outcome;
  status: number;
  completionTokens: number;
  /** What went wrong, for failed results. */
  detail?: string;
}

function isErrorBody(text: string): boolean {
  try {
    const e = (JSON.parse(text) as { error?: { message?: unknown; type?: unknown } }).error;
    return typeof e?.message === "string" && typeof e.type === "string";
  } catch {
    return false;
  }
}

/** Completion tokens of a complete response: its usage (streams are asked to include it). */
function usageTokens(text: string, stream: boolean): number {
  if (!stream)
    return (JSON.parse(text) as { usage?: { completion_tokens?: number } }).usage?.completion_tokens ?? 0;
  for (const block of text.split("\n\n").reverse()) {
    const data = block.replace(/^data: /, "");
    if (!data.startsWith("{")) continue;
    const usage = (JSON.parse(data) as { usage?: { completion_tokens?: number } | null }).usage;
    if (usage) return usage.completion_tokens ?? 0;
  }
  return 0;
}

/** Sends one chat completion and classifies how it ended; never throws. */
export async function sendChat(
  url: string,
  apiKey: string,
  body: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<ChatResult> {
  const stream = body.stream === true;
  const payload = stream ? { ...body, stream_options: { include_usage: true } } : body;
  let status = 0;
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" },
      body: JSON.stringify(payload),
      signal,
    });
    status = res.status;
    const text = await res.text();
    if (status === 503 || status === 429) {
      const clean = isErrorBody(text) && res.headers.get("retry-after") !== null;
      return clean
        ? { outcome: "refused", status, completionTokens: 0 }
        : {
            outcome: "failed",
            status,
            completionTokens: 0,
            detail: `unclean refusal: ${text.slice(0, 200)}`,
          };
    }
    if (status !== 200) return { outcome: "failed", status, completionTokens: 0, detail: text.slice(0, 200) };
    if (stream && (!text.trimEnd().endsWith("data: [DONE]") || text.includes('data: {"error"')))
      return { outcome: "failed", status, completionTokens: 0, detail: `stream: ${text.slice(-200)}` };
    return { outcome: "complete", status, completionTokens: usageTokens(text, stream) };
  } catch (err) {
    if (signal?.aborted) return { outcome: "disconnected", status, completionTokens: 0 };
    return { outcome: "failed", status, completionTokens: 0, detail: String(err) };
  }
}

export interface EngineGauges {
  queued: number;
  running: number;
  kvBytes: number;
  kvUsedBytes: number;
  /** Engine steps begun, and aborted requests freed (counters). */
  steps: number;
  abortsFreed: number;
  /** Most steps begun between an abort reaching an engine and its sequences being freed. */
  abortFreeStepsMax: number;
  /** V8 heap in use: the main thread's, and the engine workers' together. */
  mainHeapBytes: number;
  engineHeapBytes: number;
  /** V8 heap committed (in use, free within its pages, and spare pages), the same two ways. */
  mainHeapCommittedBytes: number;
  engineHeapCommittedBytes: number;
  /** The chat-template render threads' heaps together: in use, committed. */
  templateHeapBytes: number;
  templateHeapCommittedBytes: number;
}

/** The values of one metric's labelled series in a /metrics text (`name{label="prefix` narrows them). */
function lines(text: string, name: string): number[] {
  return text
    .split("\n")
    .filter((l) => l.startsWith(name.includes("{") ? name : `${name}{`))
    .map((l) => Number(l.split(" ").at(-1)));
}

/** Sums each engine gauge over the engines /metrics lists (the most, for the abort-to-free steps). */
export async function engineGauges(url: string): Promise<EngineGauges> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const sum = (name: string) => lines(text, name).reduce((n, v) => n + v, 0);
  return {
    queued: sum("ortserve_queue_depth"),
    running: sum("ortserve_running_sequences"),
    kvBytes: sum("ortserve_kv_cache_bytes"),
    kvUsedBytes: sum("ortserve_kv_cache_used_bytes"),
    steps: sum("ortserve_engine_steps_total"),
    abortsFreed: sum("ortserve_aborted_requests_freed_total"),
    abortFreeStepsMax: Math.max(0, ...lines(text, "ortserve_abort_free_steps_max")),
    mainHeapBytes: sum('ortserve_heap_used_bytes{thread="main"'),
    engineHeapBytes: sum('ortserve_heap_used_bytes{thread="engine-'),
    mainHeapCommittedBytes: sum('ortserve_heap_total_bytes{thread="main"'),
    engineHeapCommittedBytes: sum('ortserve_heap_total_bytes{thread="engine-'),
    templateHeapBytes: sum('ortserve_heap_used_bytes{thread="template-'),
    templateHeapCommittedBytes: sum('ortserve_heap_total_bytes{thread="template-'),
  };
}

export interface ProcessStats {
  rssBytes: number;
  openFds: number;
}

/** A Linux process's resident memory (VmRSS) and number of open file descriptors. */
export function processStats(pid: number): ProcessStats {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return { rssBytes: Number(kb?.[1] ?? Number.NaN) * 1024, openFds: readdirSync(`/proc/${pid}/fd`).length };
}

export const MiB = 1 << 20;
