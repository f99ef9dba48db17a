import { describe, expect, it } from "vitest";
import {
  hyperparametersFromHfConfig,
  llama3RopeFreqFactors,
  readHyperparameters,
} from "../../src/models/convert/architectures.ts";
import type { GgufValue } from "../../src/models/gguf/types.ts";

/** Gemma 3 270M's shape, under the gemma3 prefix. */
function gemma3Metadata(extra: Record<string, GgufValue> = {}): Map<string, GgufValue> {
  return new Map<string, GgufValue>(
    Object.entries({
      "general.architecture": "gemma3",
      "gemma3.block_count": 18,
      "gemma3.context_length": 32768,
      "gemma3.embedding_length": 640,
      "gemma3.feed_forward_length": 2048,
      "gemma3.attention.head_count": 4,
      "gemma3.attention.head_count_kv": 1,
      "gemma3.attention.key_length": 256,
      "gemma3.attention.value_length": 256,
      "gemma3.rope.freq_base": 1000000,
      "gemma3.attention.layer_norm_rms_epsilon": 1e-6,
      "gemma3.attention.sliding_window": 512,
      "gemma3.vocab_size": 262144,
      ...extra,
    }),
  );
}

function qwen3Metadata(extra: Record<string, GgufValue> = {}): Map<string, GgufValue> {
  return new Map<string, GgufValue>(
    Object.entries({
      "general.architecture": "qwen3",
      "qwen3.block_count": 28,
      "qwen3.context_length": 40960,
      "qwen3.embedding_length": 1024,
      "qwen3.feed_forward_length": 3072,
      "qwen3.attention.head_count": 16,
      "qwen3.attention.head_count_kv": 8,
      "qwen3.attention.key_length": 128,
      "qwen3.attention.value_length": 128,
      "qwen3.rope.freq_base": 1000000,
      "qwen3.attention.layer_norm_rms_epsilon": 1e-6,
      "qwen3.vocab_size": 151936,
      ...extra,
    }),
  );
}

describe("architecture rows", () => {
  it("reads a row's hyperparameters, head_dim from key_length", () => {
    const hp = readHyperparameters(qwen3Metadata());
    expect(hp.arch).toMatchObject({ gguf: "qwen3", qkNorm: true, qkvBias: false, unpermuteQk: false });
    expect(hp).toMatchObject({ hidden: 1024, heads: 16, kvHeads: 8, headDim: 128, ropeTheta: 1e6 });
    expect(hp.ropeFreqFactors).toBeUndefined();
  });

  it("names the supported architectures when the file's is not one", () => {
    expect(() => readHyperparameters(qwen3Metadata({ "general.architecture": "mamba" }))).toThrow(
      'unsupported architecture "mamba"; supported: llama, qwen2, qwen3, gemma3',
    );
  });

  it("refuses what would silently compute another model", () => {
    expect(() => readHyperparameters(qwen3Metadata({ "qwen3.rope.scaling.type": "yarn" }))).toThrow(
      /unsupported rope scaling "yarn"/,
    );
    expect(() => readHyperparameters(qwen3Metadata({ "qwen3.rope.dimension_count": 64 }))).toThrow(
      /rope.dimension_count 64 differs from head_dim 128/,
    );
    expect(() => readHyperparameters(qwen3Metadata(), new Float32Array(32))).toThrow(
      /rope_freqs.weight has 32 values, expected 64/,
    );
  });

  it("reads gemma3's sliding window with llama.cpp's defaults: the last layer of every six global, local base 10,000", () => {
    const hp = readHyperparameters(gemma3Metadata());
    expect(hp.arch.gemma).toBe(true);
    expect(hp.headDim).toBe(256);
    expect(hp.attentionScale).toBe(1 / 16);
    expect(hp.finalLogitSoftcap).toBeUndefined();
    const window = hp.slidingWindow!;
    expect(window.window).toBe(512);
    expect(window.ropeTheta).toBe(10000);
    expect(window.local.map((l, i) => (l ? -1 : i)).filter((i) => i >= 0)).toEqual([5, 11, 17]);
  });

  it("takes gemma3's pattern, local base and softcap from the file when it names them, and no window when it names none", () => {
    const hp = readHyperparameters(
      gemma3Metadata({
        "gemma3.attention.sliding_window_pattern": 3,
        "gemma3.rope.freq_base_swa": 20000,
        "gemma3.final_logit_softcapping": 30,
      }),
    );
    expect(hp.slidingWindow!.local.slice(0, 6)).toEqual([true, true, false, true, true, false]);
    expect(hp.slidingWindow!.ropeTheta).toBe(20000);
    expect(hp.finalLogitSoftcap).toBe(30);
    const perLayer = Array.from({ length: 18 }, (_, i) => i % 2 === 0);
    expect(
      readHyperparameters(gemma3Metadata({ "gemma3.attention.sliding_window_pattern": perLayer }))
        .slidingWindow!.local,
    ).toEqual(perLayer);
    expect(
      readHyperparameters(gemma3Metadata({ "gemma3.attention.sliding_window": 0 })).slidingWindow,
    ).toBeUndefined();
  });

  it("scales gemma3 27B's attention by hidden / heads, as llama.cpp does for its 62 layers", () => {
    const hp = readHyperparameters(
      gemma3Metadata({
        "gemma3.block_count": 62,
        "gemma3.embedding_length": 5376,
        "gemma3.attention.head_count": 32,
        "gemma3.attention.head_count_kv": 16,
        "gemma3.attention.key_length": 128,
        "gemma3.attention.value_length": 128,
      }),
    );
    expect(hp.attentionScale).toBe(1 / Math.sqrt(168));
  });

  it("reads a Gemma 3 config.json: layer kinds, local base, query_pre_attn_scalar, rope_parameters", () => {
    const config = {
      model_type: "gemma3_text",
      hidden_size: 640,
      num_attention_heads: 4,
      num_key_value_heads: 1,
      head_dim: 256,
      num_hidden_layers: 18,
      intermediate_size: 2048,
      vocab_size: 262144,
      max_position_embeddings: 32768,
      rms_norm_eps: 1e-6,
      sliding_window: 512,
      query_pre_attn_scalar: 256,
      rope_parameters: {
        full_attention: { rope_type: "default", rope_theta: 1000000 },
        sliding_attention: { rope_type: "default", rope_theta: 10000 },
      },
    };
    const hp = hyperparametersFromHfConfig(config);
    expect(hp.arch.gguf).toBe("gemma3");
    expect(hp.ropeTheta).toBe(1e6);
    expect(hp.attentionScale).toBe(1 / 16);
    expect(hp.slidingWindow!.ropeTheta).toBe(10000);
    expect(hp.slidingWindow!.local).toEqual(readHyperparameters(gemma3Metadata()).slidingWindow!.local);
    const types = hyperparametersFromHfConfig({
      ...config,
      layer_types: Array.from({ length: 18 }, (_, l) => (l < 2 ? "full_attention" : "sliding_attention")),
    }).slidingWindow!.local;
    expect(types.slice(0, 3)).toEqual([false, false, true]);
  });

  it("computes Llama 3.1's rope_scaling as frequency divisors: fast pairs kept, slow ones divided by factor", () => {
    const f = llama3RopeFreqFactors(128, 500000, {
      factor: 8,
      lowFreqFactor: 1,
      highFreqFactor: 4,
      originalContext: 8192,
    });
    expect(f).toHaveLength(64);
    expect(f[0]).toBe(1);
    expect(f[63]).toBe(8);
    const blended = [...f].filter((v) => v > 1 && v < 8);
    expect(blended.length).toBeGreaterThan(0);
    for (let i = 1; i < f.length; i++) expect(f[i]!).toBeGreaterThanOrEqual(f[i - 1]!);
  });

  it("reads rope_scaling from a Hugging Face config and refuses types it does not compute", () => {
    const config = {
      model_type: "llama",
      hidden_size: 2048,
      num_attention_heads: 32,
      num_key_value_heads: 8,
      num_hidden_layers: 16,
      intermediate_size: 8192,
      vocab_size: 128256,
      max_position_embeddings: 131072,
      rms_norm_eps: 1e-5,
      rope_theta: 500000,
      rope_scaling: {
        rope_type: "llama3",
        factor: 32,
        low_freq_factor: 1,
        high_freq_factor: 4,
        original_max_position_embeddings: 8192,
      },
    };
    const hp = hyperparametersFromHfConfig(config);
    expect(hp.headDim).toBe(64);
    expect(hp.ropeFreqFactors).toEqual(
      llama3RopeFreqFactors(64, 500000, {
        factor: 32,
        lowFreqFactor: 1,
        highFreqFactor: 4,
        originalContext: 8192,
      }),
    );
    expect(() => hyperparametersFromHfConfig({ ...config, rope_scaling: { rope_type: "yarn" } })).toThrow(
      /unsupported rope_scaling type "yarn"/,
    );
  });
});
