/**
 * ortserve seen through the fidelity `Candidate` interface, through the in-process Engine (the
 * pool, scheduler, runner and sampler the server runs). Teacher forcing is a scoring request that
 * returns every position's logits (the prompt in one prefill chunk, as llama.cpp gets it); greedy
 * is a temperature-0 generation, so the KV-cache decode path is exercised too.
 */
import { existsSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { readModelConfig } from "../../src/core/model/model-config.ts";
import { type ModelFormat, weightPath } from "../../src/core/model/model-files.ts";
import type { EngineRuntime, EngineStats } from "../../src/core/step/engine-core.ts";
import type { KvCacheDtypeSetting } from "../../src/core/types.ts";
import { Engine, type GenerateRequest, type GenerateResult } from "../../src/engine/engine.ts";
import type { Candidate } from "./compare.ts";

export interface OrtCandidate extends Candidate {
  /** What the engine's session was built with, and its cache's element type (after a first request). */
  runtime(): Promise<EngineRuntime & { kvCacheDtype: EngineStats["kvCacheDtype"] }>;
  /** The KV cache's bytes now and the bytes of one position in every layer. */
  cacheBytes(): Promise<{ bytes: number; bytesPerToken: number }>;
  /** A generation request on this candidate's engine, as Engine.generate answers it. */
  generateResult?(req: GenerateRequest): Promise<GenerateResult>;
  release(): Promise<void>;
}

export function hasConvertedModel(modelDir: string, format: ModelFormat): boolean {
  return existsSync(join(modelDir, "config.json")) && existsSync(weightPath(modelDir, format));
}

export async function openOrtCandidate(
  modelDir: string,
  format: ModelFormat,
  intraOpThreads = 2,
  kvCacheDtype: KvCacheDtypeSetting = "auto",
  /** Prompt tokens per forward pass; default: the whole context (a sequence in one pass). */
  prefillChunk?: number,
): Promise<OrtCandidate> {
  const { vocabSize, maxPositions } = readModelConfig(modelDir).decoder;
  const engine = await Engine.open({
    modelsDir: dirname(modelDir),
    format,
    workers: 1,
    threads: intraOpThreads,
    kvCacheDtype,
    // Each sequence in one forward pass, and nothing reused between cases.
    prefillChunk: prefillChunk ?? maxPositions,
    prefixCacheBytes: 0,
  });
  const model = basename(modelDir);
  return {
    vocabSize,
    async teacherForced(tokens) {
      const scored = await engine.score({ model, prompt: { tokenIds: [...tokens] }, logits: true });
      return scored.logits!;
    },
    async greedy(promptTokens, n) {
      const out = await engine.generate({
        model,
        prompt: { tokenIds: [...promptTokens] },
        params: { maxTokens: n, sampling: { temperature: 0 } },
      });
      return out.choices[0]!.tokenIds;
    },
    async runtime() {
      const stats = Object.values(await engine.stats()) as EngineStats[];
      return { ...stats[0]!.runtime, kvCacheDtype: stats[0]!.kvCacheDtype };
    },
    generateResult: (req) => engine.generate(req),
    async cacheBytes() {
      const stats = Object.values(await engine.stats()) as EngineStats[];
      return { bytes: stats[0]!.kvBytes, bytesPerToken: stats[0]!.kvBytesPerToken };
    },
    release: () => engine.close(),
  };
}
