import { Tensor } from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import { buildStepFeeds, logitsToKeepFeed } from "../../src/core/runner/feeds.ts";
import { argmax } from "../../src/core/runner/greedy.ts";
import { KvCache, pastNames, presentNames } from "../../src/core/runner/kv-cache.ts";
import { parseDecoderConfig } from "../../src/core/model/model-config.ts";

describe("argmax", () => {
  it("returns the first maximum and ignores NaN", () => {
    expect(argmax(new Float32Array([1, 3, 3, 2]))).toBe(1);
    expect(argmax(new Float32Array([Number.NaN, -1, -5]))).toBe(1);
    expect(argmax(new Float32Array([-Infinity, -Infinity]))).toBe(0);
  });
  it("works on a row inside a larger buffer", () => {
    const rows = new Float32Array([9, 0, 0, 0, 1, 7, 2, 0]);
    expect(argmax(rows, 4, 4)).toBe(1);
  });
});

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
    });
  });
  it("merges eos ids from generation_config", () => {
    expect(parseDecoderConfig(base, { eos_token_id: [2, 7] }).eosTokenIds).toEqual([2, 7]);
  });
  it("rejects a config without layer count", () => {
    const { num_hidden_layers: _, ...rest } = base;
    expect(() => parseDecoderConfig(rest)).toThrow(/num_hidden_layers/);
  });
});

describe("buildStepFeeds", () => {
  it("continues positions after the cached length", () => {
    const f = buildStepFeeds([5, 6], 3);
    expect(f.input_ids.dims).toEqual([1, 2]);
    expect([...(f.input_ids.data as BigInt64Array)]).toEqual([5n, 6n]);
    expect(f.attention_mask.dims).toEqual([1, 5]);
    expect([...(f.attention_mask.data as BigInt64Array)]).toEqual([1n, 1n, 1n, 1n, 1n]);
    expect([...(f.position_ids.data as BigInt64Array)]).toEqual([3n, 4n]);
  });
  it("makes num_logits_to_keep a scalar", () => {
    const t = logitsToKeepFeed(1);
    expect(t.dims).toEqual([]);
    expect(t.type).toBe("int64");
  });
});

describe("KvCache", () => {
  const layout = { numLayers: 2, numKvHeads: 3, headDim: 4 };
  const present = (len: number) =>
    Object.fromEntries(
      presentNames(2).map((n) => [n, new Tensor("float32", new Float32Array(3 * 4 * len), [1, 3, len, 4])]),
    );

  it("starts empty with zero-length pasts", () => {
    const kv = new KvCache(layout);
    expect(kv.length).toBe(0);
    const feeds = kv.feeds();
    expect(Object.keys(feeds)).toEqual(pastNames(2));
    expect(feeds["past_key_values.1.value"].dims).toEqual([1, 3, 0, 4]);
  });

  it("adopts presents as the next pasts and tracks the length", () => {
    const kv = new KvCache(layout);
    const first = present(5);
    kv.advance(first, 5);
    expect(kv.length).toBe(5);
    expect(kv.feeds()["past_key_values.0.key"]).toBe(first["present.0.key"]);
    kv.advance(present(6), 1);
    expect(kv.length).toBe(6);
    // The replaced tensors were disposed.
    expect(() => first["present.0.key"].data).toThrow();
  });

  it("rejects presents of the wrong length", () => {
    const kv = new KvCache(layout);
    expect(() => kv.advance(present(4), 5)).toThrow(/expected 5/);
    expect(kv.length).toBe(0);
  });
});
