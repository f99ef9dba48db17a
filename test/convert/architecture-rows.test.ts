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
import { ringPositions } from "../../src/core/runner/kv-slots.ts";
import { nativeSessions } from "../../src/core/runner/native-session.ts";
import { Engine } from "../../src/engine/engine.ts";
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

  it.runIf(row.slidingWindow !== undefined && nativeSessions !== undefined)(
    "past the local layers' rings (700 positions, rings of 256): the whole cache's floats, and llama.cpp's logits",
    async () => {
      const long = { ...row, contextLength: 1024 };
      const longGguf = writeRowGguf(join(root, `${name}-long.gguf`), long);
      const longDir = join(root, `${name}-long`);
      await convertGguf(longGguf, longDir, { format: "fp32" });
      // 64-token prompt chunks: a local layer's ring is ringPositions(7, 64) = 256 positions; with
      // the whole context in one chunk no ring is shorter than the context.
      expect(ringPositions(row.slidingWindow!, 64)).toBe(256);
      expect(ringPositions(row.slidingWindow!, 1024)).toBeGreaterThan(1024);
      const ringed = await openOrtCandidate(longDir, "fp32", 1, "auto", 64);
      const whole = await openOrtCandidate(longDir, "fp32", 1, "auto", 1024);
      const longReference = await LlamaReference.load(longGguf, { threads: 1, contextSize: 1024 });
      try {
        const prompt = Array.from({ length: 680 }, (_, i) => PROMPT[i % PROMPT.length]! + (i % 7));
        const greedy = await longReference.greedy(prompt, 20);
        const tokens = [...prompt, ...greedy];
        const ours = await ringed.teacherForced(tokens);
        expect(relativeErrors(ours, await whole.teacherForced(tokens))).toEqual({ max: 0, mean: 0 });
        // Over 700 positions GeGLU's binary16 steps (see MAX_ERROR) move a few more logits, with
        // the whole cache as with the rings; the mean stays at float rounding.
        const errors = relativeErrors(ours, await longReference.logitRows(tokens));
        expect(errors.max).toBeLessThan(1e-4);
        expect(errors.mean).toBeLessThan(1e-6);
        expect(await ringed.greedy!(prompt, greedy.length)).toEqual(greedy);
        // The local layers held their rings, not all 700 positions: under half a whole cache.
        const { bytes, bytesPerToken } = await ringed.cacheBytes();
        expect(bytes).toBeLessThan(0.5 * tokens.length * bytesPerToken);

        // With the prefix cache: blocks saved after each 64-token pass are whole in the rings, so
        // the same prompt again starts from its cached blocks and decodes the same tokens.
        const engine = await Engine.open({
          modelsDir: root,
          format: "fp32",
          workers: 1,
          threads: 1,
          prefillChunk: 64,
          prefixCacheBytes: 64 << 20,
        });
        try {
          const request = {
            model: `${name}-long`,
            prompt: { tokenIds: prompt },
            params: { maxTokens: greedy.length, sampling: { temperature: 0 } },
          };
          const first = await engine.generate(request);
          const again = await engine.generate(request);
          expect(first.choices[0]!.tokenIds).toEqual(greedy);
          expect(again.choices[0]!.tokenIds).toEqual(greedy);
          expect(first.cachedTokens).toBe(0);
          expect(again.cachedTokens).toBe(Math.floor((prompt.length - 1) / 16) * 16);
          // A prompt sharing only the first 160 tokens starts from ten early blocks, which its next
          // tokens' windows read: saved while the rings still held them, they give the floats the
          // whole computation gives (logprobs to the bit) and llama.cpp's tokens.
          const other = [...prompt.slice(0, 160), 77, 78];
          const scored = {
            model: `${name}-long`,
            prompt: { tokenIds: other },
            params: { maxTokens: 4, sampling: { temperature: 0 }, logprobs: 3 },
          };
          const shared = await engine.generate(scored);
          expect(shared.cachedTokens).toBe(160);
          const fresh = await whole.generateResult!(scored);
          expect(shared.choices[0]!.tokenIds).toEqual(fresh.choices[0]!.tokenIds);
          expect(shared.choices[0]!.logprobs).toEqual(fresh.choices[0]!.logprobs);
          expect(shared.choices[0]!.tokenIds).toEqual(await longReference.greedy(other, 4));
        } finally {
          await engine.close();
        }
      } finally {
        await ringed.release();
        await whole.release();
        await longReference.dispose();
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
