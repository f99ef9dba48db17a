/**
 * Wires the service together from its configuration: storage (keys, usage), model registry,
 * engine pool, HTTP app; starts listening and drains on SIGTERM/SIGINT.
 */

import type { Server } from "node:http";
import { getHeapStatistics } from "node:v8";
import type { TemplatePoolOptions } from "./chat/index.ts";
import type { EngineStats } from "./core/step/engine-core.ts";
import type { KvCacheDtypeSetting } from "./core/types.ts";
import { ENGINE_DEFAULTS, Engine } from "./engine/engine.ts";
import { createApp } from "./http/app.ts";
import { ModelRegistry } from "./models/registry.ts";
import { createLogger, type Logger } from "./observability/logger.ts";
import { Metrics } from "./observability/metrics.ts";
import {
  ADMISSION_DEFAULTS,
  AdmissionControl,
  type AdmissionLimits,
  REQUEST_LIMIT_DEFAULTS,
  type RequestLimits,
} from "./serving/admission.ts";
import { ChatCompletionsService } from "./serving/chat-completions.ts";
import { CheckpointRemoval } from "./serving/checkpoint-removal.ts";
import { CompletionsService } from "./serving/completions.ts";
import { MessagesService } from "./serving/messages.ts";
import { ResponsesService } from "./serving/responses.ts";
import { TokenizeService } from "./serving/tokenize.ts";
import { openStorage, type Storage } from "./storage/storage.ts";
import { UsageWriter } from "./storage/usage-writer.ts";

export interface ServerConfig {
  host: string;
  port: number;
  modelsDir: string;
  dbPath?: string;
  /** Days a stored Responses API response is kept (0: until deleted; default 30). */
  responseRetentionDays?: number;
  /** Engine worker threads. */
  workers: number;
  /** ONNX Runtime intra-op threads per worker. */
  threads: number;
  maxNumSeqs: number;
  maxModelLen: number;
  prefillChunk: number;
  prefixCacheBytes: number;
  /** The KV cache's element type ("auto": the weight format's). */
  kvCacheDtype: KvCacheDtypeSetting;
  /** Structured outputs' jump-forward (forced text joins without sampling). */
  jumpForward: boolean;
  /** Milliseconds a new structured-output constraint may take to compile; 0: no budget. */
  grammarCompileTimeoutMs: number;
  /** Admission alternates between API keys and projects of equal priority (default: on). */
  fairShare?: boolean;
  maxBodyBytes: number;
  /** Chat template rendering threads and per-render budgets. */
  templates: TemplatePoolOptions;
  /** Render templates sent in requests (`chat_template`); off unless the operator allows it. */
  trustRequestChatTemplate?: boolean;
  /** tool_choice "none" only, as the service spec has it. */
  strictToolChoice?: boolean;
  /** Waiting-request and per-key limits (0: off). */
  admission: AdmissionLimits;
  /** Per-request token limits and timeout (0: off). */
  requestLimits: RequestLimits;
  /** Check each model's files at start and skip broken ones (default: on; see registry/model-files.ts). */
  checkModelFiles?: boolean;
  /**
   * How often the models directory is scanned again while serving, in ms (default
   * MODELS_RESCAN_MS; 0: only when a request names a model not known yet).
   */
  modelsRescanMs?: number;
  /** /metrics needs an API key (default: open). */
  metricsRequireKey?: boolean;
  /** Print the bootstrap API key here (stdout by default). */
  announceKey?: (key: string) => void;
  logger?: Logger;
}

/** A model pulled, removed or replaced while the server runs is noticed within this many ms. */
export const MODELS_RESCAN_MS = 2000;

export const SERVER_DEFAULTS = {
  host: "127.0.0.1",
  port: 8000,
  ...ENGINE_DEFAULTS,
  maxBodyBytes: 8 << 20,
  admission: ADMISSION_DEFAULTS,
  requestLimits: REQUEST_LIMIT_DEFAULTS,
} as const;

export interface RunningServer {
  url: string;
  server: Server;
  storage: Storage;
  engine: Engine;
  /** Stops accepting requests, waits for in-flight ones, then releases everything. */
  close(): Promise<void>;
}

export async function startServer(config: ServerConfig): Promise<RunningServer> {
  const logger = config.logger ?? createLogger();
  const storage = openStorage(config.dbPath, { responseRetentionDays: config.responseRetentionDays });
  const envKey = process.env.ORTSERVE_API_KEY;
  if (envKey) {
    const info = storage.keys.addEnvKey(envKey);
    if (info.revokedAt) logger.warn("ORTSERVE_API_KEY is a revoked key; requests using it will be refused");
  }
  const created = storage.keys.ensureBootstrapKey();
  if (created) {
    const announce =
      config.announceKey ??
      ((key: string) =>
        process.stdout.write(`ortserve: created API key (shown once, store it now):\n${key}\n`));
    announce(created.key);
  }
  // Commits (fsync) leave the thread that writes every stream's chunks; an in-memory database has
  // no second connection to write through, so it keeps its rows here.
  const usageWriter = storage.path === ":memory:" ? undefined : new UsageWriter(storage.path);
  if (usageWriter) {
    await usageWriter.open();
    storage.keys.touchThrough((id) => usageWriter.touchKey(id));
    storage.responses.writeThrough(usageWriter);
  }
  // Responses that expired while the server was down go now, not at the next store.
  await storage.responses.purgeExpired();

  const registry = ModelRegistry.load(config.modelsDir, { checkFiles: config.checkModelFiles ?? true });
  for (const w of registry.warnings) logger.warn("model registry", { warning: w });
  for (const u of registry.unavailable) logger.warn("model unavailable", { model: u.id, reason: u.reason });

  const metrics = new Metrics();
  const engine = await Engine.open({
    registry,
    workers: config.workers,
    threads: config.threads,
    maxNumSeqs: config.maxNumSeqs,
    maxModelLen: config.maxModelLen,
    prefillChunk: config.prefillChunk,
    prefixCacheBytes: config.prefixCacheBytes,
    kvCacheDtype: config.kvCacheDtype,
    jumpForward: config.jumpForward,
    grammarCompileTimeoutMs: config.grammarCompileTimeoutMs,
    fairShare: config.fairShare ?? true,
    templates: config.templates,
    onModelsChange: ({ added, removed, gone }) => {
      if (added.length > 0) logger.info("models added", { models: added });
      if (removed.length > 0) logger.info("models removed", { models: removed });
      if (gone.length > 0) logger.info("model files replaced or removed", { dirs: gone.map((g) => g.dir) });
    },
  });
  let draining = false;
  const admission = new AdmissionControl(config.admission);
  const servingDeps = {
    admission,
    limits: config.requestLimits,
    engine,
    metrics,
    logger,
    draining: () => draining,
    trustRequestChatTemplate: config.trustRequestChatTemplate ?? false,
    strictToolChoice: config.strictToolChoice ?? false,
  };
  const chat = new ChatCompletionsService(servingDeps);
  const completions = new CompletionsService(servingDeps);
  const messages = new MessagesService(servingDeps);
  const responses = new ResponsesService(servingDeps, storage.responses);
  const tokenizer = new TokenizeService(servingDeps);
  const checkpoints = new CheckpointRemoval({ engine, logger });
  const app = createApp({
    registry,
    keys: storage.keys,
    usage: usageWriter ?? storage.usage,
    chat,
    completions,
    messages,
    responses,
    tokenizer,
    checkpoints,
    metrics,
    logger,
    maxBodyBytes: config.maxBodyBytes,
    metricsRequireKey: config.metricsRequireKey ?? false,
    draining: () => draining,
    refreshEngineMetrics: async () => {
      const t = engine.templates.counts;
      metrics.templateRenders.setTotal(t.rendered, { outcome: "rendered" });
      metrics.templateRenders.setTotal(t.timedOut, { outcome: "timed_out" });
      metrics.templateRenders.setTotal(t.outOfMemory, { outcome: "out_of_memory" });
      metrics.admissionWaiting.set(admission.waiting);
      for (const [reason, n] of Object.entries(admission.refusals))
        metrics.admissionRefusals.setTotal(n, { reason });
      const main = getHeapStatistics();
      metrics.heapUsedBytes.set(main.used_heap_size, { thread: "main" });
      metrics.heapTotalBytes.set(main.total_heap_size, { thread: "main" });
      (await engine.heapStatistics()).forEach((h, i) => {
        metrics.heapUsedBytes.set(h.usedBytes, { thread: `engine-${i}` });
        metrics.heapTotalBytes.set(h.totalBytes, { thread: `engine-${i}` });
      });
      (await engine.templates.heapStatistics()).forEach((h, i) => {
        metrics.heapUsedBytes.set(h.usedBytes, { thread: `template-${i}` });
        metrics.heapTotalBytes.set(h.totalBytes, { thread: `template-${i}` });
      });
      const stats = (await engine.stats()) as Record<string, EngineStats>;
      for (const [key, s] of Object.entries(stats)) {
        const engine = (JSON.parse(key) as { modelDir: string }).modelDir;
        metrics.queueDepth.set(s.waiting, { engine });
        metrics.waitingShares.set(s.waitingShares, { engine, fair_share: s.fairShare ? "on" : "off" });
        metrics.runningSequences.set(s.running, { engine });
        metrics.kvCacheBytes.set(s.kvBytes, { engine });
        metrics.kvCacheUsedBytes.set(s.kvUsedBytes, { engine });
        metrics.cacheConfig.set(1, {
          engine,
          cache_dtype: s.kvCacheDtype,
          bytes_per_token: String(s.kvBytesPerToken),
        });
        const { attention, projections, projectionKernel, packedWeightBytes } = s.runtime;
        if (packedWeightBytes) metrics.packedWeightBytes.set(packedWeightBytes, { engine });
        metrics.runtimeInfo.set(1, {
          engine,
          attention,
          projections,
          ...(projectionKernel ? { projection_kernel: projectionKernel } : {}),
        });
        metrics.engineSteps.setTotal(s.steps, { engine });
        metrics.mixedSteps.setTotal(s.mixedSteps, { engine });
        metrics.promptBatchSteps.setTotal(s.promptBatchSteps, { engine });
        metrics.abortsFreed.setTotal(s.abortsFreed, { engine });
        metrics.jumpForwardTokens.setTotal(s.jumpForwardTokens, { engine });
        metrics.abortFreeStepsMax.set(s.abortFreeStepsMax, { engine });
      }
    },
  });

  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(config.port, config.host, (err?: Error) => (err ? reject(err) : resolve(s)));
  });
  server.on("request", (_req, res) => {
    // A response that ends while draining leaves an idle keep-alive socket: close it right away.
    res.on("finish", () => {
      if (draining) setImmediate(() => server.closeIdleConnections());
    });
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const url = `http://${config.host}:${port}`;
  logger.info("listening", { url, models: registry.list().map((m) => m.id) });

  const rescanMs = config.modelsRescanMs ?? MODELS_RESCAN_MS;
  const rescan =
    rescanMs > 0
      ? setInterval(() => {
          engine.refreshModels().catch((err: unknown) => {
            logger.error("models directory scan failed", { error: String(err) });
          });
        }, rescanMs).unref()
      : undefined;

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      draining = true;
      clearInterval(rescan);
      logger.info("draining: waiting for in-flight requests");
      const closed = new Promise<void>((r) => server.close(() => r()));
      // Keep-alive sockets idle now would hold close() until their timeout; busy ones close after
      // their response (draining responses carry Connection: close).
      server.closeIdleConnections();
      await closed;
      // Removed checkpoints whose requests just finished: free their engines, delete their files.
      await checkpoints.settled();
      await engine.close();
      await usageWriter?.close();
      storage.close();
      logger.info("stopped");
    })();
    return closing;
  };
  return { url, server, storage, engine, close };
}
