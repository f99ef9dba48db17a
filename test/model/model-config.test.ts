import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseDecoderConfig, readModelConfig } from "../../src/core/model/model-config.ts";

describe("parseDecoderConfig", () => {
  const base = {
    num_hidden_layers: 30,
    num_attention_heads: 9,
    num_key_value_heads: 3,
    hidden_size: 576,
    vocab_size: 49152,
    max_position_embeddings: 8192,
    bos_token_id: 1,
    eos_token_id: 2,
  };
  it("reads the llama fields and derives head_dim", () => {
    expect(parseDecoderConfig(base)).toEqual({
      numLayers: 30,
      numKvHeads: 3,
      headDim: 64,
      vocabSize: 49152,
      eosTokenIds: [2],
      bosTokenId: 1,
      maxPositions: 8192,
      layerWindows: new Array(30).fill(0),
    });
  });
  it("reads each layer's sliding window from sliding_window and layer_types", () => {
    const layers = ["sliding_attention", "full_attention", "sliding_attention"];
    const cfg = { ...base, num_hidden_layers: 3, sliding_window: 512, layer_types: layers };
    expect(parseDecoderConfig(cfg).layerWindows).toEqual([512, 0, 512]);
    // A window without layer kinds (Qwen2's unused sliding_window) leaves every layer global.
    expect(parseDecoderConfig({ ...base, sliding_window: 4096 }).layerWindows).toEqual(new Array(30).fill(0));
    expect(() => parseDecoderConfig({ ...cfg, layer_types: layers.slice(1) })).toThrow(/layer_types/);
  });
  it("merges eos ids from generation_config", () => {
    expect(parseDecoderConfig(base, { eos_token_id: [2, 7] }).eosTokenIds).toEqual([2, 7]);
  });
  it("rejects a config without layer count", () => {
    const { num_hidden_layers: _, ...rest } = base;
    expect(() => parseDecoderConfig(rest)).toThrow(/num_hidden_layers/);
  });

  it("readModelConfig reads both files once, strictly, with the sampling defaults", () => {
    const dir = mkdtempSync(join(tmpdir(), "ortserve-config-"));
    try {
      expect(() => readModelConfig(dir)).toThrow(/config.json not found/);
      writeFileSync(join(dir, "config.json"), JSON.stringify(base));
      expect(readModelConfig(dir).generationDefaults).toEqual({
        temperature: undefined,
        top_p: undefined,
        top_k: undefined,
        min_p: undefined,
        repetition_penalty: undefined,
      });
      writeFileSync(join(dir, "generation_config.json"), JSON.stringify({ temperature: 0.3, top_p: 0.9 }));
      expect(readModelConfig(dir).generationDefaults).toMatchObject({ temperature: 0.3, top_p: 0.9 });
      writeFileSync(join(dir, "config.json"), JSON.stringify({ ...base, vocab_size: "many" }));
      expect(() => readModelConfig(dir)).toThrow(/vocab_size/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
