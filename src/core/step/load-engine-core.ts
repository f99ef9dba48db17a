/** Builds a EngineCore from a converted model directory: ONNX session, config and tokenizer. */

import { fromTransformersTokenizer } from "../output/transformers-adapter.ts";
import { loadDecoderConfig } from "../runner/model-config.ts";
import { createDecoderSession } from "../runner/ort-session.ts";
import { loadTransformersTokenizer } from "../runner/tokenizer.ts";
import type { EngineCoreConfig } from "../types.ts";
import { EngineCore } from "./engine-core.ts";

export async function loadEngineCore(config: EngineCoreConfig): Promise<EngineCore> {
  const model = await loadDecoderConfig(config.modelDir);
  const session = await createDecoderSession(config.modelDir, config.format, {
    intraOpThreads: config.intraOpThreads,
  });
  const tok = await loadTransformersTokenizer(config.modelDir);
  const maxModelLen = Math.min(config.maxModelLen, model.maxPositions);
  return new EngineCore({ ...config, maxModelLen }, model, session, {
    encode: (text, addSpecialTokens) => tok.encode(text, { add_special_tokens: addSpecialTokens }),
    tokenizer: fromTransformersTokenizer(tok),
  });
}
