/**
 * Prometheus metrics, kept by hand (the text format is small): counters, gauges and histograms
 * with labels, rendered by `render()` for GET /metrics.
 */

type Labels = Record<string, string>;

function labelKey(labels: Labels): string {
  const parts = Object.entries(labels)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

class Counter {
  readonly values = new Map<string, number>();
  inc(labels: Labels = {}, by = 1): void {
    const k = labelKey(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  /** For totals another component keeps (worker pools): the counter takes their value. */
  setTotal(value: number, labels: Labels = {}): void {
    this.values.set(labelKey(labels), value);
  }
}

class Gauge {
  readonly values = new Map<string, number>();
  set(value: number, labels: Labels = {}): void {
    this.values.set(labelKey(labels), value);
  }
}

class Histogram {
  readonly buckets: number[];
  readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(buckets: number[]) {
    this.buckets = buckets;
  }
  observe(value: number, labels: Labels = {}): void {
    const k = labelKey(labels);
    let s = this.series.get(k);
    if (!s) {
      s = { labels, counts: new Array(this.buckets.length).fill(0), sum: 0, count: 0 };
      this.series.set(k, s);
    }
    this.buckets.forEach((b, i) => {
      if (value <= b) s.counts[i]! += 1;
    });
    s.sum += value;
    s.count += 1;
  }
}

const SECONDS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export class Metrics {
  readonly requests = new Counter();
  readonly errors = new Counter();
  readonly promptTokens = new Counter();
  readonly completionTokens = new Counter();
  readonly cachedTokens = new Counter();
  readonly latency = new Histogram(SECONDS);
  readonly ttft = new Histogram(SECONDS);
  readonly queueTime = new Histogram(SECONDS);
  readonly queueDepth = new Gauge();
  readonly waitingShares = new Gauge();
  readonly runningSequences = new Gauge();
  readonly kvCacheBytes = new Gauge();
  readonly kvCacheUsedBytes = new Gauge();
  readonly cacheConfig = new Gauge();
  readonly runtimeInfo = new Gauge();
  readonly packedWeightBytes = new Gauge();
  readonly inFlight = new Gauge();
  readonly templateRenders = new Counter();
  readonly admissionWaiting = new Gauge();
  readonly admissionRefusals = new Counter();
  readonly requestTimeouts = new Counter();
  readonly engineSteps = new Counter();
  readonly mixedSteps = new Counter();
  readonly promptBatchSteps = new Counter();
  readonly abortsFreed = new Counter();
  readonly jumpForwardTokens = new Counter();
  readonly abortFreeStepsMax = new Gauge();
  readonly heapUsedBytes = new Gauge();
  readonly heapTotalBytes = new Gauge();

  render(): string {
    const out: string[] = [];
    const counter = (name: string, help: string, c: Counter) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
      for (const [k, v] of c.values) out.push(`${name}${k} ${v}`);
    };
    const gauge = (name: string, help: string, g: Gauge) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
      for (const [k, v] of g.values) out.push(`${name}${k} ${v}`);
    };
    const histogram = (name: string, help: string, h: Histogram) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
      for (const s of h.series.values()) {
        h.buckets.forEach((b, i) => {
          out.push(`${name}_bucket${labelKey({ ...s.labels, le: String(b) })} ${s.counts[i]}`);
        });
        out.push(`${name}_bucket${labelKey({ ...s.labels, le: "+Inf" })} ${s.count}`);
        out.push(
          `${name}_sum${labelKey(s.labels)} ${s.sum}`,
          `${name}_count${labelKey(s.labels)} ${s.count}`,
        );
      }
    };
    counter("ortserve_requests_total", "HTTP requests by route and status.", this.requests);
    counter("ortserve_errors_total", "Requests that ended in an error, by route and status.", this.errors);
    counter("ortserve_prompt_tokens_total", "Prompt tokens processed.", this.promptTokens);
    counter("ortserve_completion_tokens_total", "Completion tokens generated.", this.completionTokens);
    counter(
      "ortserve_cached_prompt_tokens_total",
      "Prompt tokens served from the prefix cache.",
      this.cachedTokens,
    );
    histogram("ortserve_request_latency_seconds", "Time from request to last byte.", this.latency);
    histogram(
      "ortserve_time_to_first_token_seconds",
      "Time from request to the first generated token.",
      this.ttft,
    );
    histogram(
      "ortserve_request_queue_seconds",
      "Time a prompt waited in its engine's queue for a free row (after any admission wait).",
      this.queueTime,
    );
    gauge("ortserve_queue_depth", "Requests waiting for admission, per engine.", this.queueDepth);
    gauge(
      "ortserve_waiting_shares",
      "Callers (API key and project) with requests waiting, per engine; label fair_share: whether admission alternates between them (on) or follows arrival (off).",
      this.waitingShares,
    );
    gauge(
      "ortserve_running_sequences",
      "Sequences being prefilled or decoded, per engine.",
      this.runningSequences,
    );
    gauge(
      "ortserve_kv_cache_bytes",
      "Bytes of KV cache the engine holds (the memory pages the positions its rows have held occupy), per engine.",
      this.kvCacheBytes,
    );
    gauge(
      "ortserve_kv_cache_used_bytes",
      "KV cache bytes holding live tokens, per engine.",
      this.kvCacheUsedBytes,
    );
    gauge(
      "ortserve_cache_config_info",
      "The KV cache's configuration, per engine, in its labels (cache_dtype: float32, float16 or int8; bytes_per_token across layers); the value is 1.",
      this.cacheConfig,
    );
    gauge(
      "ortserve_runtime_info",
      "What computes each engine's model, in its labels (attention: ortserve or onnxruntime; projections: ortserve.BlockQuantMatMul, MatMulNBits or MatMul; projection_kernel: the instruction set of ortserve's kernel, avx512-vnni or avx2); the value is 1.",
      this.runtimeInfo,
    );
    gauge(
      "ortserve_packed_weight_bytes",
      "Bytes of the projections' weights as ortserve.BlockQuantMatMul packed them (what every decode step reads; the model's resident weights), per engine; absent where ONNX Runtime's MatMulNBits or MatMul runs.",
      this.packedWeightBytes,
    );
    gauge("ortserve_requests_in_flight", "HTTP requests being served.", this.inFlight);
    counter(
      "ortserve_template_renders_total",
      "Chat template renders by outcome (rendered, timed_out, out_of_memory).",
      this.templateRenders,
    );
    gauge(
      "ortserve_admission_waiting_requests",
      "Generation requests admitted and not yet generating (template, queue, prefill).",
      this.admissionWaiting,
    );
    counter(
      "ortserve_admission_refusals_total",
      "Generation requests refused by admission control, by reason (waiting_full, key_concurrency, key_tokens).",
      this.admissionRefusals,
    );
    counter(
      "ortserve_request_timeouts_total",
      "Generations ended by the request timeout.",
      this.requestTimeouts,
    );
    counter("ortserve_engine_steps_total", "Engine steps begun, per engine.", this.engineSteps);
    counter(
      "ortserve_engine_mixed_steps_total",
      "Engine steps whose decode rows and prompt chunk ran as one forward pass, per engine.",
      this.mixedSteps,
    );
    counter(
      "ortserve_engine_prompt_batch_steps_total",
      "Engine steps that prefilled several prompts' chunks, per engine.",
      this.promptBatchSteps,
    );
    counter(
      "ortserve_aborted_requests_freed_total",
      "Aborted or disconnected requests whose sequences the engine freed, per engine.",
      this.abortsFreed,
    );
    counter(
      "ortserve_jump_forward_tokens_total",
      "Structured-output tokens the grammar forced, joined without sampling (jump-forward), per engine.",
      this.jumpForwardTokens,
    );
    gauge(
      "ortserve_abort_free_steps_max",
      "Most engine steps begun after an abort reached the engine and before its sequences were freed (0: freed at the next step boundary).",
      this.abortFreeStepsMax,
    );
    gauge(
      "ortserve_heap_used_bytes",
      "V8 heap in use, per JavaScript thread (main: HTTP and scheduling; engine-N: engine worker N; template-N: chat-template render thread N).",
      this.heapUsedBytes,
    );
    gauge(
      "ortserve_heap_total_bytes",
      "V8 heap committed, per JavaScript thread (main; engine-N; template-N).",
      this.heapTotalBytes,
    );
    return `${out.join("\n")}\n`;
  }
}
