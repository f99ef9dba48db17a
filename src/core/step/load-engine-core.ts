/** Builds an EngineCore from a converted model directory: ONNX session, config and tokenizer. */
import { PrefixCache } from "../cache/prefix-cache.ts";
import { readModelConfig } from "../model/model-config.ts";
import { fromTransformersTokenizer } from "../output/transformers-adapter.ts";
import { TokenizerThread } from "../prompt/tokenizer-thread.ts";
import { BatchRunner } from "../runner/batch-runner.ts";
import { KvSlots } from "../runner/kv-slots.ts";
import { nativeSessions } from "../runner/native-session.ts";
import { checkDecoderContract, createDecoderSession } from "../runner/ort-session.ts";
import { loadTransformersTokenizer } from "../runner/tokenizer.ts";
import { runtimeFlags } from "../runtime-flags.ts";
import type { EngineCoreConfig } from "../types.ts";
import { EngineCore } from "./engine-core.ts";

export async function loadEngineCore(config: EngineCoreConfig): Promise<EngineCore> {
  const model = readModelConfig(config.modelDir).decoder;
  const tok = await loadTransformersTokenizer(config.modelDir);
  // Its thread loads beside the session, not awaited: short prompts never wait for it (admission.ts).
  const prompts = new TokenizerThread(config.modelDir);
  prompts.info().catch(() => {});
  let built: Awaited<ReturnType<typeof createDecoderSession>>;
  try {
    // Loaded last, so a bad config or tokenizer cannot leak a session.
    built = await createDecoderSession(
      config.modelDir,
      config.format,
      {
        intraOpThreads: config.intraOpThreads,
        kvCacheDtype: config.kvCacheDtype,
        // The engine is done with a step's logits before the next forward pass.
        reuseLogits: true,
      },
      runtimeFlags,
    );
  } catch (err) {
    await prompts.close();
    throw err;
  }
  try {
    checkDecoderContract(built.session, model.numLayers);
  } catch (err) {
    await prompts.close();
    await built.session.release();
    throw err;
  }
  const maxModelLen = Math.min(config.maxModelLen, model.maxPositions);
  const kv = new KvSlots(
    {
      layers: model.numLayers,
      kvHeads: model.numKvHeads,
      headDim: model.headDim,
      windows: model.layerWindows,
    },
    {
      maxRows: config.maxNumSeqs,
      maxPositions: maxModelLen,
      stepTokens: config.prefillChunk,
      dtype: built.kvCacheDtype,
      // Only a session that binds the cache in place can take it whole: onnxruntime-node's copies it out every run.
      reserve: built.bindsCacheInPlace,
      onReserve: (memory) => nativeSessions?.keepSmallPages(memory),
    },
  );
  const prefixCache = new PrefixCache(config.prefixCacheBytes);
  return new EngineCore(
    { ...config, maxModelLen },
    model,
    new BatchRunner(built.session, kv, { prefixCache, mixedSteps: runtimeFlags.mixedSteps }),
    {
      encode: (text, addSpecialTokens) => tok.encode(text, { add_special_tokens: addSpecialTokens }),
      tokenizer: fromTransformersTokenizer(tok),
      prompts,
    },
    {
      attention: built.attention,
      projections: built.projections,
      ...(built.projectionKernel ? { projectionKernel: built.projectionKernel } : {}),
      ...(built.packedWeightBytes ? { packedWeightBytes: built.packedWeightBytes } : {}),
    },
    prefixCache,
  );
}
