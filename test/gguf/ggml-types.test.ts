import { describe, expect, it } from "vitest";
import { GGML_TYPES, ggmlByteLength, ggmlTypeInfo, ggmlTypeName } from "../../src/models/gguf/ggml-types.ts";

describe("ggml type table", () => {
  it("has llama.cpp's block and type sizes", () => {
    const sizes = Object.fromEntries(GGML_TYPES.map((t) => [t.name, [t.blockSize, t.typeSize]]));
    expect(sizes).toMatchObject({
      F32: [1, 4],
      F16: [1, 2],
      BF16: [1, 2],
      Q4_0: [32, 18],
      Q4_1: [32, 20],
      Q5_0: [32, 22],
      Q5_1: [32, 24],
      Q8_0: [32, 34],
      Q2_K: [256, 84],
      Q3_K: [256, 110],
      Q4_K: [256, 144],
      Q5_K: [256, 176],
      Q6_K: [256, 210],
      Q8_K: [256, 292],
      IQ2_XXS: [256, 66],
      IQ4_XS: [256, 136],
      TQ2_0: [256, 66],
    });
    expect(new Set(GGML_TYPES.map((t) => t.id)).size).toBe(GGML_TYPES.length);
  });

  it("names and rejects what it cannot dequantize", () => {
    expect(ggmlTypeInfo(12).name).toBe("Q4_K");
    expect(ggmlTypeName(16)).toBe("IQ2_XXS");
    expect(ggmlTypeName(99)).toBe("type 99");
    expect(() => ggmlTypeInfo(16, "blk.0.attn_q.weight")).toThrow(
      "unsupported ggml tensor type 16 (IQ2_XXS) in tensor blk.0.attn_q.weight",
    );
    expect(() => ggmlTypeInfo(99, "x")).toThrow("unknown ggml tensor type 99 in tensor x");
    expect(() => ggmlTypeInfo(31)).toThrow(/Q4_0_4_4.*removed/);
  });

  it("computes byte lengths of whole blocks only", () => {
    expect(ggmlByteLength(8, 576 * 49152)).toBe((576 * 49152 * 34) / 32);
    expect(() => ggmlByteLength(12, 300)).toThrow(/not a multiple of the Q4_K block size 256/);
  });
});
