/**
 * Each architecture row against llama.cpp: a synthetic GGUF with random F32 weights and the row's
 * features loads in llama.cpp and, converted to fp32, in ortserve's engine; both compute the same
 * logits (to float rounding) over a prompt and llama.cpp's greedy continuation, and greedy decoding
 * picks the same tokens. The same weights as a Hugging Face checkpoint (safetensors and config.json)
 * convert to the same function.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readModelConfig } from "../../src/core/model/model-config.ts";
import { hyperparametersFromHfConfig, readHyperparameters } from "../../src/models/convert/architectures.ts";
import { convertGguf } from "../../src/models/convert/convert.ts";
import { convertSafetensors } from "../../src/models/convert/convert-safetensors.ts";
import { openGguf } from "../../src/models/gguf/reader.ts";
import { LlamaReference } from "../fidelity/llama-reference.ts";
import { type OrtCandidate, openOrtCandidate } from "../fidelity/ort-candidate.ts";
import {
  rowVocabulary,
  SYNTHETIC_ROWS,
  writeRowCheckpoint,
  writeRowGguf,
} from "../fixtures/synthetic-architectures.ts";

const PROMPT = [5, 40, 80, 120, 3, 200, 17, 260, 9, 99, 150, 42, 7, 33, 61, 250];
const CONTINUATION = 24;

/** Largest |a - b| over the rows, relative to the largest |b|. */
function relativeMaxError(a: Float32Array, b: Float32Array): number {
  return relativeErrors(a, b).max;
}

/** Largest and mean |a - b| over the rows, relative to the largest |b|. */
function relativeErrors(a: Float32Array, b: Float32Array): { max: number; mean: number } {
  let diff = 0;
  let sum = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    diff = Math.max(diff, d);
    sum += d;
    scale = Math.max(scale, Math.abs(b[i]!));
  }
  expect(scale).toBeGreaterThan(1);
  return { max: diff / scale, mean: sum / b.length / scale };
}

/**
 * gemma3's GeGLU rounds its input to binary16 as llama.cpp's CPU backend does, so a last-bit
 * difference upstream now and then moves one activation by a binary16 step: the largest error is a
 * few times float rounding's (measured 2.4e-6 with the AVX2 kernels, 6.3e-6 with the portable
 * ones), while the mean stays at float rounding (1e-7; an exact GELU instead gives 1.3e-5, and a
 * largest error of 7.9e-5).
 */
const MAX_ERROR: Record<string, number> = { gemma3: 2e-5 };

describe.each(Object.entries(SYNTHETIC_ROWS))("architecture row %s against llama.cpp", (name, row) => {
  let root: string;
  let gguf: string;
  let modelDir: string;
  let reference: LlamaReference;
  let ortserve: OrtCandidate;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), `ortserve-row-${name}-`));
    gguf = writeRowGguf(join(root, `${name}.gguf`), row);
    modelDir = join(root, name);
    await convertGguf(gguf, modelDir, { format: "fp32" });
    reference = await LlamaReference.load(gguf, { threads: 1, contextSize: 256 });
    ortserve = await openOrtCandidate(modelDir, "fp32", 1);
  });

  afterAll(async () => {
    await ortserve?.release();
    await reference?.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  it("converts the row's shapes and end-of-turn ids into config.json", () => {
    const config = readModelConfig(modelDir).decoder;
    expect(config.headDim).toBe(row.headDim);
    expect(config.numKvHeads).toBe(row.kvHeads);
    const tokens = rowVocabulary().tokens;
    const ends = [
      2,
      ...(row.endOfTurn ?? []).map((k) => tokens.indexOf(k === "eot" ? "<|eot_id|>" : "<|eom_id|>")),
    ];
    expect([...config.eosTokenIds].sort()).toEqual(ends.sort());
  });

  it("writes a config.json a checkpoint import reads back to the GGUF's hyperparameters", () => {
    const written = JSON.parse(readFileSync(join(modelDir, "config.json"), "utf8")) as Record<
      string,
      unknown
    >;
    const file = openGguf(gguf);
    try {
      // Llama 3's RoPE factors are left out: config.json does not carry rope_scaling (hf-config.ts).
      const { ropeFreqFactors: _factors, ...fromGguf } = readHyperparameters(file.metadata);
      const { ropeFreqFactors: _hfFactors, ...fromConfig } = hyperparametersFromHfConfig(written);
      expect(fromConfig).toEqual(fromGguf);
    } finally {
      file.close();
    }
  });

  it("computes llama.cpp's logits over a prompt and its greedy continuation, and decodes the same tokens", async () => {
    expect(reference.vocabSize).toBe(ortserve.vocabSize);
    const greedy = await reference.greedy(PROMPT, CONTINUATION);
    expect(greedy.length).toBeGreaterThan(4);
    const tokens = [...PROMPT, ...greedy];
    const theirs = await reference.logitRows(tokens);
    const ours = await ortserve.teacherForced(tokens);
    expect(ours.length).toBe(theirs.length);
    const errors = relativeErrors(ours, theirs);
    expect(errors.max).toBeLessThan(MAX_ERROR[name] ?? 1e-5);
    expect(errors.mean).toBeLessThan(1e-6);
    expect(await ortserve.greedy!(PROMPT, greedy.length)).toEqual(greedy);
  });

  it.runIf(row.slidingWindow !== undefined)(
    "uses the sliding window: the same weights with a window longer than the sequence give other logits",
    async () => {
      const wide = writeRowGguf(join(root, `${name}-wide.gguf`), { ...row, slidingWindow: 64 });
      const wideDir = join(root, `${name}-wide`);
      await convertGguf(wide, wideDir, { format: "fp32" });
      const wideModel = await openOrtCandidate(wideDir, "fp32", 1);
      try {
        const tokens = [...PROMPT, ...PROMPT];
        const narrow = await ortserve.teacherForced(tokens);
        const all = await wideModel.teacherForced(tokens);
        const rowWidth = ortserve.vocabSize;
        // Up to the window's length both see every position; after it they differ.
        const window = row.slidingWindow!;
        expect(
          relativeMaxError(all.subarray(0, window * rowWidth), narrow.subarray(0, window * rowWidth)),
        ).toBeLessThan(1e-6);
        expect(relativeMaxError(all, narrow)).toBeGreaterThan(1e-2);
      } finally {
        await wideModel.release();
      }
    },
  );

  it("converts the same weights from a Hugging Face checkpoint to the same logits", async () => {
    const checkpoint = join(root, "checkpoint");
    writeRowCheckpoint(gguf, row, checkpoint);
    const hfDir = join(root, `${name}-from-safetensors`);
    convertSafetensors(checkpoint, modelDir, hfDir, { format: "fp32" });
    const fromHf = await openOrtCandidate(hfDir, "fp32", 1);
    try {
      const tokens = [...PROMPT, 11, 12, 13];
      expect(await fromHf.teacherForced(tokens)).toEqual(await ortserve.teacherForced(tokens));
    } finally {
      await fromHf.release();
    }
  });
});
