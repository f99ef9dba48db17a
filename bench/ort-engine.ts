/**
 * ortserve as a benchmark engine, through the in-process Engine: the worker pool, scheduler,
 * runner and sampler the server runs. Prefill = the time to the first token of a request whose
 * prompt is not in the prefix cache (prompt in one chunk); decode = the time between the first and
 * the last token of a greedy request that ignores EOS.
 */
import { basename, dirname } from "node:path";
import { readModelConfig } from "../src/core/model/model-config.ts";
import type { ModelFormat } from "../src/core/model/model-files.ts";
import { Engine } from "../src/engine/engine.ts";
import type { BenchEngine, DecodeResult, PrefillResult } from "./engine.ts";
import { nowSeconds } from "./stats.ts";

export async function openOrtEngine(
  modelDir: string,
  format: ModelFormat,
  threads: number,
): Promise<BenchEngine> {
  const { maxPositions } = readModelConfig(modelDir).decoder;
  const engine = await Engine.open({
    modelsDir: dirname(modelDir),
    format,
    workers: 1,
    threads,
    prefillChunk: maxPositions,
    // Every run computes its prompt: a prefix-cache hit would time a copy, not a prefill.
    prefixCacheBytes: 0,
  });
  const model = basename(modelDir);
  const greedy = (prompt: readonly number[], maxTokens: number) => ({
    model,
    prompt: { tokenIds: [...prompt] },
    params: { maxTokens, sampling: { temperature: 0, ignoreEos: true } },
  });
  return {
    name: `ort-${format}`,
    notes: {},
    async prefill(prompt): Promise<PrefillResult> {
      const t0 = nowSeconds();
      await engine.generate(greedy(prompt, 1));
      return { seconds: nowSeconds() - t0 };
    },
    async decode(prompt, n): Promise<DecodeResult> {
      let first = 0;
      let last = 0;
      const out = await engine.generate(greedy(prompt, n + 1), {
        onEvent: (e) => {
          if (e.type !== "delta") return;
          last = nowSeconds();
          if (first === 0) first = last;
        },
      });
      return { seconds: last - first, ids: out.choices[0]!.tokenIds };
    },
    async weightBytesRead() {
      for (const s of Object.values(await engine.stats())) {
        const packed = (s as { runtime?: { packedWeightBytes?: number } }).runtime?.packedWeightBytes;
        if (packed) return packed;
      }
      return undefined;
    },
    close: () => engine.close(),
  };
}
