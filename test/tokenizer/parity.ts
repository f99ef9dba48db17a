/**
 * Tokenizer parity against llama.cpp: the converted tokenizer files, loaded by transformers.js
 * offline, must produce the same ids as llama.cpp (node-llama-cpp) on the same GGUF.
 *
 * Modes compared: transformers.js always splits added tokens out of the text and, with
 * add_special_tokens = false, adds no BOS/EOS; that is llama.cpp's tokenize(text, add_special =
 * false, parse_special = true), which node-llama-cpp's `model.tokenize(text, true)` calls.
 * Decoding keeps special tokens on both sides (`detokenize(ids, true)`).
 *
 * Used by test/tokenizer/parity.test.ts and by the fidelity script (`tokenizerParity`).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { AutoTokenizer, env, type PreTrainedTokenizer } from "@huggingface/transformers";
import {
  getLlama,
  type Llama,
  LlamaLogLevel,
  type LlamaModel,
  type LlamaModelOptions,
  type Token,
} from "node-llama-cpp";
import { buildTokenizerFiles, type TokenizerFiles } from "../../src/models/convert/tokenizer.ts";
import { openGguf } from "../../src/models/gguf/reader.ts";
import { tokenizerCorpus } from "../fidelity/tokenizer-corpus.ts";

export interface Mismatch {
  index: number;
  text: string;
  expected: number[];
  actual: number[];
}

export interface DecodeMismatch {
  index: number;
  text: string;
  /** Our decoding of our ids. */
  decoded: string;
  /** What it should have been: llama.cpp's detokenization, or the input for a round trip. */
  expected: string;
}

export interface ParityReport {
  /** Strings compared. */
  total: number;
  /** Strings whose ids matched llama.cpp exactly. */
  identical: number;
  /** Strings whose ids also decode to the same text llama.cpp's detokenizer gives. */
  decodeIdentical: number;
  /** Strings with decode(encode(s)) === s. */
  roundTrips: number;
  firstMismatch?: Mismatch;
  firstDecodeMismatch?: DecodeMismatch;
  firstRoundTripFailure?: DecodeMismatch;
}

export interface TokenizerPair {
  ours: PreTrainedTokenizer;
  reference: LlamaModel;
}

/** Writes the files to a fresh directory and loads them the way ortserve does: offline, by id. */
export async function loadConvertedTokenizer(files: TokenizerFiles): Promise<PreTrainedTokenizer> {
  const root = mkdtempSync(join(tmpdir(), "ortserve-tokenizer-"));
  // A fresh id per load, so nothing keyed on the id can hand back an earlier tokenizer.
  const id = basename(root);
  const saved = { allowRemoteModels: env.allowRemoteModels, localModelPath: env.localModelPath };
  try {
    mkdirSync(join(root, id));
    writeFileSync(join(root, id, "tokenizer.json"), JSON.stringify(files.tokenizerJson));
    writeFileSync(join(root, id, "tokenizer_config.json"), JSON.stringify(files.tokenizerConfigJson));
    env.allowRemoteModels = false;
    env.localModelPath = root;
    return await AutoTokenizer.from_pretrained(id);
  } finally {
    env.allowRemoteModels = saved.allowRemoteModels;
    env.localModelPath = saved.localModelPath;
    rmSync(root, { recursive: true, force: true });
  }
}

/** GGUF metadata to change before either side reads it, by dotted key (e.g. "tokenizer.ggml.pre"). */
export type MetadataOverrides = Record<string, string | number | boolean>;

/** node-llama-cpp takes overrides as a nested object. */
function nestOverrides(overrides: MetadataOverrides): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(overrides)) {
    const path = key.split(".");
    let node = root;
    for (const part of path.slice(0, -1)) {
      node[part] ??= {};
      node = node[part] as Record<string, unknown>;
    }
    node[path.at(-1)!] = value;
  }
  return root;
}

let llama: Promise<Llama> | undefined;

/** llama.cpp on the CPU; the vocabulary is all the tokenizer needs. */
export async function loadReference(
  ggufPath: string,
  overrides: MetadataOverrides = {},
): Promise<LlamaModel> {
  llama ??= getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  return (await llama).loadModel({
    modelPath: ggufPath,
    vocabOnly: true,
    metadataOverrides: nestOverrides(overrides) as LlamaModelOptions["metadataOverrides"],
  });
}

/** Our files for a GGUF, built from its metadata with the same overrides llama.cpp gets. */
export function convertTokenizer(ggufPath: string, overrides: MetadataOverrides = {}): TokenizerFiles {
  const file = openGguf(ggufPath);
  try {
    const metadata = new Map(file.metadata);
    for (const [key, value] of Object.entries(overrides)) metadata.set(key, value);
    return buildTokenizerFiles(metadata);
  } finally {
    file.close();
  }
}

export async function loadPair(ggufPath: string, overrides: MetadataOverrides = {}): Promise<TokenizerPair> {
  const [ours, reference] = await Promise.all([
    loadConvertedTokenizer(convertTokenizer(ggufPath, overrides)),
    loadReference(ggufPath, overrides),
  ]);
  return { ours, reference };
}

export function encodeOurs(tok: PreTrainedTokenizer, text: string): number[] {
  return tok.encode(text, { add_special_tokens: false });
}

export function decodeOurs(tok: PreTrainedTokenizer, ids: number[]): string {
  // transformers.js refuses an empty id list; the empty decoding is the empty string.
  return ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: false });
}

export function encodeReference(model: LlamaModel, text: string): number[] {
  return model.tokenize(text, true).map(Number);
}

export function decodeReference(model: LlamaModel, ids: number[]): string {
  return model.detokenize(ids as Token[], true);
}

function sameIds(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export function compareTokenizers(pair: TokenizerPair, corpus: readonly string[]): ParityReport {
  const report: ParityReport = { total: corpus.length, identical: 0, decodeIdentical: 0, roundTrips: 0 };
  corpus.forEach((text, index) => {
    const expected = encodeReference(pair.reference, text);
    const actual = encodeOurs(pair.ours, text);
    if (sameIds(expected, actual)) report.identical++;
    else report.firstMismatch ??= { index, text, expected, actual };

    const decoded = decodeOurs(pair.ours, actual);
    const reference = decodeReference(pair.reference, actual);
    if (decoded === reference) report.decodeIdentical++;
    else report.firstDecodeMismatch ??= { index, text, decoded, expected: reference };
    if (decoded === text) report.roundTrips++;
    else report.firstRoundTripFailure ??= { index, text, decoded, expected: text };
  });
  return report;
}

/** The whole check for one GGUF: convert, load both sides, compare on the corpus. */
export async function tokenizerParity(
  ggufPath: string,
  corpus: readonly string[] = tokenizerCorpus,
  overrides: MetadataOverrides = {},
): Promise<ParityReport> {
  const pair = await loadPair(ggufPath, overrides);
  try {
    return compareTokenizers(pair, corpus);
  } finally {
    await pair.reference.dispose();
  }
}
