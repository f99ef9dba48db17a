/** Builds an EngineCore from a converted model directory: ONNX session, config and tokenizer. */
import { PrefixCache } from "../cache/prefix-cache.ts";
import { readModelConfig } from "../model/model-config.ts";
import { fromTransformersTokenizer } from "../output/transformers-adapter.ts";
import { BatchRunner } from "../runner/batch-runner.ts";
import { KvSlots, kvDtypeOf } from "../runner/kv-slots.ts";
import { NativeDecoderSession, nativeSessions } from "../runner/native-session.ts";
import { attentionRuntime, checkDecoderContract, createDecoderSession } from "../runner/ort-session.ts";
import { loadTransformersTokenizer } from "../runner/tokenizer.ts";
import type { EngineCoreConfig } from "../types.ts";
import { EngineCore } from "./engine-core.ts";

export async function loadEngineCore(config: EngineCoreConfig): Promise<EngineCore> {
  const model = readModelConfig(config.modelDir).decoder;
  const tok = await loadTransformersTokenizer(config.modelDir);
  // Loaded last, so a bad config or tokenizer cannot leak a session.
  const session = await createDecoderSession(config.modelDir, config.format, {
    intraOpThreads: config.intraOpThreads,
    kvCacheDtype: config.kvCacheDtype,
    // The engine is done with a step's logits before the next forward pass.
    reuseLogits: true,
  });
  try {
    checkDecoderContract(session, model.numLayers);
  } catch (err) {
    await session.release();
    throw err;
  }
  const maxModelLen = Math.min(config.maxModelLen, model.maxPositions);
  const kv = new KvSlots(
    { layers: model.numLayers, kvHeads: model.numKvHeads, headDim: model.headDim },
    {
      maxRows: config.maxNumSeqs,
      maxPositions: maxModelLen,
      dtype: kvDtypeOf(session),
      // Only a session that binds the cache in place can take it whole: onnxruntime-node's copies it out every run.
      reserve: session instanceof NativeDecoderSession,
      onReserve: (memory) => nativeSessions?.keepSmallPages(memory),
    },
  );
  const { kernel, projections, projectionKernel } = attentionRuntime(config.format, config.kvCacheDtype);
  const prefixCache = new PrefixCache(config.prefixCacheBytes);
  return new EngineCore(
    { ...config, maxModelLen },
    model,
    new BatchRunner(session, kv, {
      prefixCache,
      // ORTSERVE_MIXED_STEPS=0 runs the decode rows and a prompt chunk as two passes (to measure what one saves).
      mixedSteps: process.env.ORTSERVE_MIXED_STEPS !== "0",
    }),
    {
      encode: (text, addSpecialTokens) => tok.encode(text, { add_special_tokens: addSpecialTokens }),
      tokenizer: fromTransformersTokenizer(tok),
    },
    {
      attention: kernel,
      projections,
      projectionKernel,
      ...(session instanceof NativeDecoderSession && session.packedWeightBytes > 0
        ? { packedWeightBytes: session.packedWeightBytes }
        : {}),
    },
    prefixCache,
  );
}
