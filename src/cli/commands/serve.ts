/**
 * `ortserve serve`: make sure the default model is ready (same as `setup`), then serve every model
 * of the models directory over the OpenAI-compatible HTTP API until SIGTERM/SIGINT, which drain
 * in-flight requests before exiting.
 */

import { RESPONSE_RETENTION_DEFAULT_DAYS } from "../../storage/responses.ts";
import { UsageError } from "../../util/usage-error.ts";
import { parseCommandLine, parseKvCacheDtype, parseNonNegativeInt, parsePositiveInt } from "../args.ts";
import { capYoungGeneration } from "../young-generation.ts";
import { runSetup } from "./setup.ts";

export const summary = "serve the models directory over the OpenAI-compatible HTTP API";

export const usage = `Usage: ortserve serve [options]

Prepares the default model (fetch + convert, skipped when done), then serves every
model in the models directory on an OpenAI-compatible API (POST /v1/chat/completions,
POST /v1/responses, GET /v1/models, GET /v1/preview/models/{id}/checkpoints, /health, /metrics, /openapi.json);
every route but /health (and /metrics unless --metrics-require-key) needs an API key.
On first start with no API key, one is created and printed once.

Options:
  --host <addr>          listen address (default: 127.0.0.1)
  --port <n>             listen port (default: $PORT or 8000)
  --models-dir <dir>     models directory (default: $ORTSERVE_MODELS_DIR or <repo>/models)
  --models-rescan-ms <n> how often the models directory is scanned again while serving: a
                         model pulled, removed or replaced is served, dropped or reloaded
                         without a restart (default: 2000; 0: only when a request names a
                         model not known yet)
  --db <file>            SQLite database for keys and usage (default: $ORTSERVE_DB or <repo>/.cache/ortserve.db)
  --response-retention-days <n>
                         days a stored Responses API response (store: true) is kept for
                         GET /v1/responses/{id} and previous_response_id; expired ones are
                         purged (default: $ORTSERVE_RESPONSE_RETENTION_DAYS or 30; 0: kept
                         until deleted)
  --workers <n>          engine worker threads (default: 1)
  --threads <n>          ONNX Runtime threads per worker (default: 2)
  --max-num-seqs <n>     sequences decoded together per model (default: 16)
  --max-model-len <n>    context limit per sequence (default: 4096, at most the model's)
  --kv-cache-dtype <t>   KV cache precision: auto, float32, float16 or int8 (default: auto,
                         float16 for q4 weights and float32 for fp32). int8 holds a cached
                         position in 68 bytes per KV head instead of 128 (float16): about
                         half the cache memory per token, at a small cost in exactness
                         (README: Fidelity)
  --trust-request-chat-template
                         render chat templates sent in requests (\`chat_template\`); without
                         it such requests get a 400 (templates are code the server runs)
  --strict-tool-choice   accept only tool_choice "none" (the service spec); without it auto,
                         required and a named function are served with the model's tool parser
  --template-workers <n> threads rendering chat templates (default: 2)
  --template-timeout-ms <n>
                         time one template render may take before its thread is replaced
                         and the request gets a 400 (default: 5000)
  --template-max-chars <n>
                         characters one template render may produce (default: 16777216)
  --max-waiting-requests <n>
                         requests waiting to start generating before new ones get a 503
                         with Retry-After (default: 1024; 0: no limit)
  --max-concurrent-requests-per-key <n>
                         requests one API key may have running; beyond it a 429 with
                         Retry-After (default: 0, no limit)
  --max-tokens-per-minute-per-key <n>
                         prompt + completion tokens one API key may use per minute; beyond
                         it a 429 with Retry-After (default: 0, no limit)
  --max-prompt-tokens <n>
                         prompt tokens per request; beyond it a 400 (default: 0, no limit
                         but the context)
  --max-total-tokens <n> prompt + completion tokens per request; beyond it a 400 (default: 0,
                         no limit but the context)
  --request-timeout-s <n>
                         a generation still running after this many seconds ends with a 408
                         (or a stream error event) (default: 600; 0: no limit)
  --no-jump-forward      structured outputs: sample every token, also text the grammar forces
                         (default: forced text joins without sampling, several tokens per pass)
  --grammar-compile-timeout-ms <n>
                         time a new structured-output constraint may take to compile (in a
                         thread of its own, so decoding never waits longer); beyond it a 400
                         (default: 10000; 0: no budget, compile on the engine's thread)
  --no-fair-share        admit waiting requests of equal priority in arrival order (default:
                         alternate between API keys and projects, so one caller's flood cannot
                         starve another's requests)
  --metrics-require-key  /metrics needs an API key like every route but /health
                         (default: /metrics is open, for scrapers on a private network)
  --no-setup             do not fetch/convert the default model first
  -h, --help             show this help
`;

export async function run(argv: string[]): Promise<void> {
  const { values } = parseCommandLine({
    args: argv,
    options: {
      host: { type: "string" },
      port: { type: "string" },
      "models-dir": { type: "string" },
      db: { type: "string" },
      "response-retention-days": { type: "string" },
      workers: { type: "string" },
      threads: { type: "string" },
      "max-num-seqs": { type: "string" },
      "max-model-len": { type: "string" },
      "kv-cache-dtype": { type: "string" },
      "trust-request-chat-template": { type: "boolean" },
      "strict-tool-choice": { type: "boolean" },
      "template-workers": { type: "string" },
      "template-timeout-ms": { type: "string" },
      "template-max-chars": { type: "string" },
      "max-waiting-requests": { type: "string" },
      "max-concurrent-requests-per-key": { type: "string" },
      "max-tokens-per-minute-per-key": { type: "string" },
      "max-prompt-tokens": { type: "string" },
      "max-total-tokens": { type: "string" },
      "request-timeout-s": { type: "string" },
      "metrics-require-key": { type: "boolean" },
      "models-rescan-ms": { type: "string" },
      "no-jump-forward": { type: "boolean" },
      "no-fair-share": { type: "boolean" },
      "grammar-compile-timeout-ms": { type: "string" },
      "no-setup": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  capYoungGeneration();
  const { MODELS_RESCAN_MS, SERVER_DEFAULTS, startServer } = await import("../../server.ts");
  const { modelsDir } = await import("../../util/paths.ts");
  const portText = values.port ?? process.env.PORT;
  const port = portText === "0" ? 0 : parsePositiveInt("--port", portText, SERVER_DEFAULTS.port);
  if (port > 65535) throw new UsageError(`--port must be at most 65535 (got ${port})`);
  const dir = modelsDir(values["models-dir"]);
  const limit = (name: keyof typeof values, fallback: number) =>
    parseNonNegativeInt(`--${name}`, values[name] as string | undefined, fallback);
  const kvCacheDtype = parseKvCacheDtype(values["kv-cache-dtype"], SERVER_DEFAULTS.kvCacheDtype);
  const responseRetentionDays = parseNonNegativeInt(
    "--response-retention-days",
    values["response-retention-days"] ?? process.env.ORTSERVE_RESPONSE_RETENTION_DAYS,
    RESPONSE_RETENTION_DEFAULT_DAYS,
  );
  if (!values["no-setup"]) await runSetup({ modelsDir: values["models-dir"] });

  const server = await startServer({
    ...SERVER_DEFAULTS,
    host: values.host ?? SERVER_DEFAULTS.host,
    port,
    modelsDir: dir,
    dbPath: values.db,
    responseRetentionDays,
    workers: parsePositiveInt("--workers", values.workers, SERVER_DEFAULTS.workers),
    threads: parsePositiveInt("--threads", values.threads, SERVER_DEFAULTS.threads),
    maxNumSeqs: parsePositiveInt("--max-num-seqs", values["max-num-seqs"], SERVER_DEFAULTS.maxNumSeqs),
    maxModelLen: parsePositiveInt("--max-model-len", values["max-model-len"], SERVER_DEFAULTS.maxModelLen),
    kvCacheDtype,
    trustRequestChatTemplate: values["trust-request-chat-template"] ?? false,
    strictToolChoice: values["strict-tool-choice"] ?? false,
    metricsRequireKey: values["metrics-require-key"] ?? false,
    modelsRescanMs: limit("models-rescan-ms", MODELS_RESCAN_MS),
    jumpForward: !values["no-jump-forward"],
    fairShare: !values["no-fair-share"],
    grammarCompileTimeoutMs: limit("grammar-compile-timeout-ms", SERVER_DEFAULTS.grammarCompileTimeoutMs),
    admission: {
      maxWaiting: limit("max-waiting-requests", SERVER_DEFAULTS.admission.maxWaiting),
      maxConcurrentPerKey: limit(
        "max-concurrent-requests-per-key",
        SERVER_DEFAULTS.admission.maxConcurrentPerKey,
      ),
      tokensPerMinutePerKey: limit(
        "max-tokens-per-minute-per-key",
        SERVER_DEFAULTS.admission.tokensPerMinutePerKey,
      ),
    },
    requestLimits: {
      maxPromptTokens: limit("max-prompt-tokens", SERVER_DEFAULTS.requestLimits.maxPromptTokens),
      maxTotalTokens: limit("max-total-tokens", SERVER_DEFAULTS.requestLimits.maxTotalTokens),
      requestTimeoutMs:
        limit("request-timeout-s", SERVER_DEFAULTS.requestLimits.requestTimeoutMs / 1000) * 1000,
    },
    templates: {
      workers: parsePositiveInt(
        "--template-workers",
        values["template-workers"],
        SERVER_DEFAULTS.templates.workers,
      ),
      timeoutMs: parsePositiveInt(
        "--template-timeout-ms",
        values["template-timeout-ms"],
        SERVER_DEFAULTS.templates.timeoutMs,
      ),
      maxOutputChars: parsePositiveInt(
        "--template-max-chars",
        values["template-max-chars"],
        SERVER_DEFAULTS.templates.maxOutputChars,
      ),
    },
  });
  process.stderr.write(`ortserve: serving on ${server.url}\n`);
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      process.stderr.write(`ortserve: ${signal}: draining in-flight requests\n`);
      server.close().then(resolve, resolve);
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
}
