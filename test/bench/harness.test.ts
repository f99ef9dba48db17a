/** The bench harness's pure parts: finding a model's source GGUF, naming the CPU, the roofline. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { vectorInstructionSets } from "../../bench/cpu-flags.ts";
import { bytesPerToken, meanDecodeContext, rooflineShare } from "../../bench/roofline.ts";
import { sha256File } from "../../src/models/fetch/digest.ts";
import { sourceGguf } from "../../src/models/source-gguf.ts";

const dir = mkdtempSync(join(tmpdir(), "ortserve-harness-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function stampedModel(name: string, sha: string): string {
  const model = join(dir, "models", name);
  mkdirSync(join(model, "onnx"), { recursive: true });
  writeFileSync(
    join(model, "onnx", ".converted.json"),
    JSON.stringify({ gguf_sha256: sha, converter_version: "6", formats: ["q4"], files: [] }),
  );
  return model;
}

describe("sourceGguf", () => {
  const ggufs = join(dir, "gguf");
  mkdirSync(ggufs, { recursive: true });
  writeFileSync(join(ggufs, "a.gguf"), "first file");
  writeFileSync(join(ggufs, "b.gguf"), "second file");

  it("finds the file whose SHA-256 the conversion stamp records", async () => {
    const sha = await sha256File(join(ggufs, "b.gguf"));
    expect(await sourceGguf(stampedModel("b", sha), ggufs)).toBe(join(ggufs, "b.gguf"));
  });

  it("says which hash it looked for when no file has it, and when there is no stamp", async () => {
    await expect(sourceGguf(stampedModel("gone", "0".repeat(64)), ggufs)).rejects.toThrow(
      /SHA-256 0{64}; no such file in .*--gguf/,
    );
    const bare = join(dir, "models", "bare");
    mkdirSync(bare, { recursive: true });
    await expect(sourceGguf(bare, ggufs)).rejects.toThrow(/no conversion stamp/);
  });
});

describe("vectorInstructionSets", () => {
  it("lists the AVX family, FMA and F16C once each, sorted", () => {
    const cpuinfo = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f avx avx512_vnni f16c sse4_2\n";
    expect(vectorInstructionSets(`${cpuinfo}${cpuinfo}`)).toEqual([
      "avx",
      "avx2",
      "avx512_vnni",
      "avx512f",
      "f16c",
      "fma",
    ]);
    expect(vectorInstructionSets("")).toEqual([]);
  });
});

describe("roofline", () => {
  it("counts the weights and the mean context's KV reads per token", () => {
    expect(meanDecodeContext(128, 257)).toBe(256);
    const reads = { weightBytes: 1e9, kvBytesPerPosition: 1000, meanContext: 256 };
    expect(bytesPerToken(reads)).toBe(1_000_256_000);
    expect(rooflineShare(10, reads, 20e9)).toBeCloseTo(0.500128, 6);
  });
});
