import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InferenceSession, Tensor } from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readModelConfig } from "../../src/core/model/model-config.ts";
import { type ModelFormat, weightPath } from "../../src/core/model/model-files.ts";
import { BatchRunner } from "../../src/core/runner/batch-runner.ts";
import type { DecoderSession } from "../../src/core/runner/decoder-session.ts";
import type { KvDtype } from "../../src/core/runner/kv-rows.ts";
import { type KvShape, KvSlots, kvDtypeOf } from "../../src/core/runner/kv-slots.ts";
import { NativeDecoderSession, nativeSessions } from "../../src/core/runner/native-session.ts";
import { OrtDecoderSession } from "../../src/core/runner/ort-decoder-session.ts";
import { checkDecoderContract, createDecoderSession } from "../../src/core/runner/ort-session.ts";
import { loadTransformersTokenizer } from "../../src/core/runner/tokenizer.ts";
import { parseRuntimeFlags } from "../../src/core/runtime-flags.ts";
import { buildSyntheticModel, SYNTHETIC } from "../fixtures/synthetic-model.ts";
import { hasModel, MODEL_DIR } from "./model-fixture.ts";
import { relativeGap } from "./relative-gap.ts";
import { runAll } from "./run-all.ts";

const THREADS = 2;

/** onnxruntime-node's session with the options createDecoderSession gives it. */
function ortInferenceSession(path: string): Promise<InferenceSession> {
  return InferenceSession.create(path, {
    executionProviders: ["cpu"],
    graphOptimizationLevel: "all",
    executionMode: "sequential",
    intraOpNumThreads: THREADS,
    interOpNumThreads: 1,
  });
}

/** The same, as the runner takes it. */
async function ortSession(path: string): Promise<OrtDecoderSession> {
  return new OrtDecoderSession(await ortInferenceSession(path));
}

/** This process's mappings of `path`: where each starts, its size and its resident bytes (/proc/self/smaps). */
function dataMappings(path: string): { start: string; bytes: number; residentBytes: number }[] {
  const maps: { start: string; bytes: number; residentBytes: number }[] = [];
  let current: (typeof maps)[number] | undefined;
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      current =
        header[3] === path
          ? {
              start: header[1]!,
              bytes: Number.parseInt(header[2]!, 16) - Number.parseInt(header[1]!, 16),
              residentBytes: 0,
            }
          : undefined;
      if (current) maps.push(current);
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && current) current.residentBytes = Number(rss[1]) * 1024;
  }
  return maps;
}

function bytes(a: ArrayBufferView): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

/** Every byte of the cache's buffers (all rows, all positions), layer by layer. */
function kvMemory(kv: KvSlots, rows: number): Buffer[] {
  return Object.values(kv.bind(0, rows).feeds).map((t) => Buffer.from(bytes(t.data as Float32Array)));
}

/**
 * Drives two runners (onnxruntime-node's session and the native one) through the same prefill
 * chunks and ragged decode steps, and checks after every run that the logits and the whole KV
 * memory are bit-identical, or within `tolerance` (relative to the largest value) when given.
 */
async function compareRunners(
  shape: KvShape,
  ort: DecoderSession,
  native: DecoderSession,
  prompts: number[][],
  chunk: number,
  steps: number,
  maxPositions: number,
  tolerance?: number,
): Promise<number> {
  const rows = prompts.length;
  // A small initial capacity, so the cache grows (re-lays out) mid-run.
  const a = new BatchRunner(ort, new KvSlots(shape, { maxRows: rows, maxPositions, initialPositions: 8 }));
  const b = new BatchRunner(native, new KvSlots(shape, { maxRows: rows, maxPositions, initialPositions: 8 }));
  let runs = 0;
  const floats = (b: Buffer) => new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  const same = (x: Float32Array, y: Float32Array) => {
    expect(y.length).toBe(x.length);
    const ka = kvMemory(a.kv, rows);
    const kb = kvMemory(b.kv, rows);
    expect(kb.length).toBe(ka.length);
    if (tolerance === undefined) {
      expect(bytes(y).equals(bytes(x))).toBe(true);
      for (let i = 0; i < ka.length; i++) expect(kb[i]!.equals(ka[i]!)).toBe(true);
    } else {
      expect(relativeGap(x, y)).toBeLessThan(tolerance);
      for (let i = 0; i < ka.length; i++)
        expect(relativeGap(floats(ka[i]!), floats(kb[i]!))).toBeLessThan(tolerance);
    }
    runs++;
  };
  const last: number[] = [];
  const lengths: number[] = [];
  for (const [row, prompt] of prompts.entries()) {
    let x: { logits: Float32Array; vocab: number } | undefined;
    for (let done = 0; done < prompt.length; done += chunk) {
      const part = prompt.slice(done, done + chunk);
      // The first chunk keeps every position's logits (prompt logprobs), the rest the last one.
      const keep = done === 0 ? 0 : 1;
      const ra = await a.prefill(row, part, done, keep);
      const rb = await b.prefill(row, part, done, keep);
      same(ra.logits, rb.logits);
      x = ra;
    }
    last.push(argmaxRow(x!.logits, x!.vocab, x!.logits.length / x!.vocab - 1));
    lengths.push(prompt.length);
  }
  for (let s = 0; s < steps; s++) {
    // Ragged: every row at its own length; the last row sits out every other step.
    const n = s % 2 === 0 ? rows : rows - 1;
    const ra = await a.decode(last.slice(0, n), lengths.slice(0, n));
    const rb = await b.decode(last.slice(0, n), lengths.slice(0, n));
    same(ra.logits, rb.logits);
    for (let r = 0; r < n; r++) {
      last[r] = argmaxRow(ra.logits, ra.vocab, r);
      lengths[r]! += 1;
    }
  }
  return runs;
}

function argmaxRow(logits: Float32Array, vocab: number, row: number): number {
  let best = 0;
  const base = row * vocab;
  for (let i = 1; i < vocab; i++) if (logits[base + i]! > logits[base + best]!) best = i;
  return best;
}

describe.skipIf(!nativeSessions)("native decoder session (ONNX Runtime C API, IoBinding)", () => {
  describe("on the synthetic model", () => {
    let root: string;
    const sessions: { release(): Promise<void> }[] = [];
    const shape = {
      layers: SYNTHETIC.layers,
      kvHeads: SYNTHETIC.kvHeads,
      headDim: SYNTHETIC.hidden / SYNTHETIC.heads,
    };
    const paths: Partial<Record<ModelFormat, string>> = {};

    beforeAll(async () => {
      root = mkdtempSync(join(tmpdir(), "ortserve-native-session-"));
      const { modelDir } = await buildSyntheticModel(root, ["fp32", "q4"]);
      paths.fp32 = weightPath(modelDir, "fp32");
      paths.q4 = weightPath(modelDir, "q4");
    });

    afterAll(async () => {
      for (const s of sessions) await s.release();
      rmSync(root, { recursive: true, force: true });
    });

    async function both(format: ModelFormat): Promise<[OrtDecoderSession, NativeDecoderSession]> {
      const ort = await ortSession(paths[format]!);
      const native = nativeSessions!.create(paths[format]!, {
        intraOpThreads: THREADS,
        interOpThreads: 1,
        cachedAttention: false,
      });
      sessions.push(ort, native);
      return [ort, native];
    }

    it("describes the model as onnxruntime-node does and follows the decoder contract", async () => {
      const native = (await both("fp32"))[1];
      const ort = await ortInferenceSession(paths.fp32!);
      sessions.push(ort);
      expect(native.inputNames).toEqual(ort.inputNames);
      expect(native.outputNames).toEqual(ort.outputNames);
      expect(native.inputMetadata).toEqual(ort.inputMetadata);
      expect(native.outputMetadata).toEqual(ort.outputMetadata);
      expect(() => checkDecoderContract(native, SYNTHETIC.layers)).not.toThrow();
    });

    for (const format of ["fp32", "q4"] as const)
      it(`BatchRunner gives bit-identical logits and KV memory (${format})`, async () => {
        const [ort, native] = await both(format);
        const prompts = [
          [1, 40, 80, 120, 3, 200, 17, 9, 31, 77, 5],
          [5, 99, 150, 42, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20],
          [260, 261],
        ];
        const runs = await compareRunners(shape, ort, native, prompts, 5, 24, SYNTHETIC.contextLength);
        expect(runs).toBe(3 + 4 + 1 + 24);
      });

    // q4 quantises every projection's activations to int8 blocks (accuracy level 4): a float
    // rounding difference upstream (the attention's, the SwiGLU's sigmoid) can move a value one
    // quantisation step, and over 30 runs sharing a cache that grew to ~1e-2 of the largest
    // logit (measured). fp32 holds the kernels to float rounding; the epilogue operators are held
    // to it on their own in epilogue-ops.test.ts; a wrong kernel is off by far more than 5e-2.
    for (const [format, tolerance] of [
      ["fp32", 1e-5],
      ["q4", 5e-2],
    ] as const)
      it(`ortserve's attention kernel and epilogues match ONNX Runtime's nodes (${format})`, async () => {
        const [, exact] = await both(format);
        const cached = nativeSessions!.create(paths[format]!, {
          intraOpThreads: THREADS,
          interOpThreads: 1,
          cachedAttention: true,
        });
        sessions.push(cached);
        const prompts = [
          [1, 40, 80, 120, 3, 200, 17, 9, 31, 77, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18],
          [5, 99, 150, 42, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20],
          [260, 261],
        ];
        const runs = await compareRunners(
          shape,
          exact,
          cached,
          prompts,
          10,
          24,
          SYNTHETIC.contextLength,
          tolerance,
        );
        expect(runs).toBe(3 + 2 + 1 + 24);
      });

    // binary16 keeps 11 significant bits: a relative error of ~5e-4 per cached value; the 8-bit
    // cache rounds each value to 1/254 of its position's largest magnitude.
    const reducedCaches: [KvDtype, number][] = [
      ["float16", 1e-2],
      ["int8", 4e-2],
    ];
    for (const [dtype, bound] of reducedCaches)
      it(`a ${dtype} cache: logits within its rounding of the float32 cache's`, async () => {
        const f32 = nativeSessions!.create(paths.fp32!, {
          intraOpThreads: THREADS,
          interOpThreads: 1,
          cachedAttention: true,
        });
        const reduced = nativeSessions!.create(paths.fp32!, {
          intraOpThreads: THREADS,
          interOpThreads: 1,
          cachedAttention: true,
          kvCacheDtype: dtype,
        });
        sessions.push(f32, reduced);
        expect(kvDtypeOf(reduced)).toBe(dtype);
        const a = new BatchRunner(
          f32,
          new KvSlots(shape, { maxRows: 2, maxPositions: SYNTHETIC.contextLength, initialPositions: 8 }),
        );
        const b = new BatchRunner(
          reduced,
          new KvSlots(shape, {
            maxRows: 2,
            maxPositions: SYNTHETIC.contextLength,
            initialPositions: 8,
            dtype,
          }),
        );
        const prompt = [1, 40, 80, 120, 3, 200, 17, 9, 31, 77, 5, 6, 7, 8, 9, 10, 11, 12];
        let gap = 0;
        for (let done = 0; done < prompt.length; done += 6) {
          const part = prompt.slice(done, done + 6);
          gap = Math.max(
            gap,
            relativeGap(
              (await a.prefill(0, part, done, 0)).logits,
              (await b.prefill(0, part, done, 0)).logits,
            ),
          );
        }
        for (let s = 0; s < 12; s++) {
          const len = prompt.length + s;
          gap = Math.max(
            gap,
            relativeGap((await a.decode([s + 3], [len])).logits, (await b.decode([s + 3], [len])).logits),
          );
        }
        expect(gap).toBeGreaterThan(0);
        expect(gap).toBeLessThan(bound);
      });

    it("runs with the outputs named, and reports bad feeds and fetches", async () => {
      const [ort, native] = await both("fp32");
      const feeds: Record<string, Tensor> = {
        input_ids: new Tensor("int64", BigInt64Array.of(1n, 40n, 80n), [1, 3]),
        attention_mask: new Tensor("int64", BigInt64Array.of(1n, 1n, 1n), [1, 3]),
        position_ids: new Tensor("int64", BigInt64Array.of(0n, 1n, 2n), [1, 3]),
        num_logits_to_keep: new Tensor("int64", BigInt64Array.of(0n), []),
      };
      for (let l = 0; l < shape.layers; l++)
        for (const kind of ["key", "value"])
          feeds[`past_key_values.${l}.${kind}`] = new Tensor("float32", new Float32Array(0), [
            1,
            shape.kvHeads,
            0,
            shape.headDim,
          ]);
      const expected = await runAll(ort, feeds);
      const all = await runAll(native, feeds);
      expect(Object.keys(all).sort()).toEqual(Object.keys(expected).sort());
      for (const [name, t] of Object.entries(expected)) {
        expect(all[name]!.dims).toEqual(t.dims);
        expect(bytes(all[name]!.data as Float32Array).equals(bytes(t.data as Float32Array))).toBe(true);
      }
      // present.* has no shape known before the run: ONNX Runtime allocates it and it is copied out.
      const named = await native.run(feeds, { logits: null, "present.1.value": null });
      expect(Object.keys(named)).toEqual(["logits", "present.1.value"]);
      expect(
        bytes(named["present.1.value"]!.data as Float32Array).equals(
          bytes(expected["present.1.value"]!.data as Float32Array),
        ),
      ).toBe(true);

      await expect(native.run({ ...feeds, nope: feeds.input_ids! }, { logits: null })).rejects.toThrow(
        /no input nope/,
      );
      const int32 = new Tensor("int32", Int32Array.of(1, 40, 80), [1, 3]);
      await expect(native.run({ ...feeds, input_ids: int32 }, { logits: null })).rejects.toThrow(/type/);
      // A name that is no output is an error on either session, never read as something else.
      for (const session of [native, ort])
        await expect(session.run(feeds, { logits: null, nope: null })).rejects.toThrow(/no output nope/);
    });

    it("keeps its binding across runs: changed tensors are rebound, a concurrent run binds its own", async () => {
      const [ort, native] = await both("fp32");
      const mine = new BatchRunner(
        native,
        new KvSlots(shape, { maxRows: 2, maxPositions: SYNTHETIC.contextLength }),
      );
      const reference = new BatchRunner(
        ort,
        new KvSlots(shape, { maxRows: 2, maxPositions: SYNTHETIC.contextLength }),
      );
      const same = async (run: (r: BatchRunner) => Promise<{ logits: Float32Array }>) => {
        const got = await run(mine);
        const want = await run(reference);
        expect(bytes(got.logits).equals(bytes(want.logits))).toBe(true);
      };
      await same((r) => r.prefill(0, [1, 2, 3], 0));
      await same((r) => r.prefill(1, [4, 5], 0));
      // The same rows step after step: only ids, positions, mask and logits are compared and
      // cross again (runWithCache).
      await same((r) => r.decode([6, 7], [3, 2]));
      await same((r) => r.decode([8, 9], [4, 3]));
      // A prompt long enough to grow the cache: new buffers, so every KV tensor is rebound.
      await same((r) =>
        r.prefill(
          0,
          Array.from({ length: 70 }, (_, i) => 10 + i),
          5,
        ),
      );
      await same((r) => r.decode([11, 12], [75, 4]));

      const feeds: Record<string, Tensor> = {
        input_ids: new Tensor("int64", BigInt64Array.of(1n, 40n), [1, 2]),
        attention_mask: new Tensor("int64", BigInt64Array.of(1n, 1n), [1, 2]),
        position_ids: new Tensor("int64", BigInt64Array.of(0n, 1n), [1, 2]),
        num_logits_to_keep: new Tensor("int64", BigInt64Array.of(1n), []),
      };
      // Two positions of zeros for every cache name with `prefix` (past_key_values or present).
      const kvTensors = (prefix: string): Record<string, Tensor> => {
        const out: Record<string, Tensor> = {};
        for (let l = 0; l < shape.layers; l++)
          for (const kind of ["key", "value"])
            out[`${prefix}.${l}.${kind}`] = new Tensor(
              "float32",
              new Float32Array(2 * shape.kvHeads * shape.headDim),
              [1, shape.kvHeads, 2, shape.headDim],
            );
        return out;
      };
      Object.assign(feeds, kvTensors("past_key_values"));
      // Each run gets its own present.* tensors: a run writes them and reads them back, so two runs
      // in flight sharing one output race (pairs differed now and then under CPU load).
      const fetches = (): Record<string, Tensor | null> => ({ logits: null, ...kvTensors("present") });
      const want = (await ort.run(feeds, { logits: null })).logits!.data as Float32Array;
      // Started together: the first takes the kept binding, the second (it is in use) its own.
      const [x, y] = await Promise.all([native.run(feeds, fetches()), native.run(feeds, fetches())]);
      for (const out of [x, y])
        expect(bytes(out.logits!.data as Float32Array).equals(bytes(want))).toBe(true);
      // Those runs bound other tensors to every cache name: the runner's next step, with the very
      // cache binding object it used before them, must bind its cache again (runWithCache's
      // shortcut skips only while nothing else has bound since).
      await same((r) => r.decode([13, 14], [76, 5]));
      await same((r) => r.decode([15, 16], [77, 6]));
    });

    it("reuseLogits keeps one logits buffer: each result is valid until the next run", async () => {
      const native = nativeSessions!.create(paths.fp32!, {
        intraOpThreads: THREADS,
        interOpThreads: 1,
        reuseLogits: true,
        cachedAttention: false,
      });
      sessions.push(native);
      const plain = (await both("fp32"))[1];
      const a = new BatchRunner(
        native,
        new KvSlots(shape, { maxRows: 2, maxPositions: SYNTHETIC.contextLength }),
      );
      const b = new BatchRunner(
        plain,
        new KvSlots(shape, { maxRows: 2, maxPositions: SYNTHETIC.contextLength }),
      );
      const first = await a.prefill(0, [1, 2, 3], 0);
      const firstCopy = first.logits.slice();
      expect(bytes(firstCopy).equals(bytes((await b.prefill(0, [1, 2, 3], 0)).logits))).toBe(true);
      const second = await a.prefill(1, [7, 8], 0);
      expect(second.logits.buffer).toBe(first.logits.buffer);
      expect(bytes(second.logits).equals(bytes((await b.prefill(1, [7, 8], 0)).logits))).toBe(true);
    });

    it("createDecoderSession returns the native session unless ORTSERVE_NATIVE_SESSION=0, and what it built", async () => {
      const modelDir = join(paths.fp32!, "..", "..");
      const native = await createDecoderSession(modelDir, "fp32", { intraOpThreads: 1 });
      sessions.push(native.session);
      expect(native.session).toBeInstanceOf(NativeDecoderSession);
      expect(native).toMatchObject({
        attention: "ortserve",
        ragged: true,
        projections: "MatMul",
        bindsCacheInPlace: true,
      });
      // The graph rewrite off: the native session runs ONNX Runtime's attention, and says so.
      const plain = await createDecoderSession(
        modelDir,
        "fp32",
        { intraOpThreads: 1 },
        parseRuntimeFlags({ ORTSERVE_CACHED_ATTENTION: "0" }),
      );
      sessions.push(plain.session);
      expect(plain).toMatchObject({ attention: "onnxruntime", ragged: false, bindsCacheInPlace: true });
      const ort = await createDecoderSession(
        modelDir,
        "fp32",
        { intraOpThreads: 1 },
        parseRuntimeFlags({ ORTSERVE_NATIVE_SESSION: "0" }),
      );
      sessions.push(ort.session);
      expect(ort.session).toBeInstanceOf(OrtDecoderSession);
      expect(ort).toMatchObject({
        attention: "onnxruntime",
        kvCacheDtype: "float32",
        bindsCacheInPlace: false,
      });
    });
  });

  describe.skipIf(!hasModel("q4"))("on the default model (q4)", () => {
    let ort: DecoderSession;
    let native: DecoderSession;
    let prompts: number[][];
    const config = () => readModelConfig(MODEL_DIR).decoder;

    beforeAll(async () => {
      ort = await ortSession(weightPath(MODEL_DIR, "q4"));
      native = nativeSessions!.create(weightPath(MODEL_DIR, "q4"), {
        intraOpThreads: THREADS,
        interOpThreads: 1,
        cachedAttention: false,
      });

      const tok = await loadTransformersTokenizer(MODEL_DIR);
      prompts = [
        "The quick brown fox jumps over the lazy dog. The capital of France is",
        "Write a haiku about the sea:",
        "1, 2, 3, 4,",
      ].map((t) => tok.encode(t, { add_special_tokens: false }));
    });

    afterAll(async () => {
      await ort?.release();
      await native?.release();
    });

    it("BatchRunner gives bit-identical logits and KV memory over prefill chunks and ragged decode", async () => {
      const c = config();
      expect(() => checkDecoderContract(native, c.numLayers)).not.toThrow();
      const runs = await compareRunners(
        { layers: c.numLayers, kvHeads: c.numKvHeads, headDim: c.headDim },
        ort,
        native,
        prompts,
        6,
        12,
        256,
      );
      expect(runs).toBeGreaterThan(12);
    });

    it.skipIf(!nativeSessions?.blockQuantMatMul || process.platform !== "linux")(
      "gives back the pages of the external data it packed: the file's mappings stay mostly unresident",
      async () => {
        const data = `${weightPath(MODEL_DIR, "q4")}_data`;
        const before = new Set(dataMappings(data).map((m) => m.start));
        const packed = nativeSessions!.create(weightPath(MODEL_DIR, "q4"), {
          intraOpThreads: THREADS,
          interOpThreads: 1,
          cachedAttention: true,
        });
        try {
          expect(packed.packedWeightBytes).toBeGreaterThan(0);
          // This session's own mappings of the file (onnxruntime-node's session above has its own).
          const mine = dataMappings(data).filter((m) => !before.has(m.start));
          const mapped = mine.reduce((n, m) => n + m.bytes, 0);
          const resident = mine.reduce((n, m) => n + m.residentBytes, 0);
          // The packed projections are most of the file; what stays is the embedding rows and
          // norms read so far, and the pages each tensor shares with its neighbours.
          expect(mapped).toBeGreaterThan(packed.packedWeightBytes / 2);
          expect(resident).toBeLessThan(0.1 * mapped);
          // The session still computes: the pages come back from the file when read.
          const c = config();
          const runner = new BatchRunner(
            packed,
            new KvSlots(
              { layers: c.numLayers, kvHeads: c.numKvHeads, headDim: c.headDim },
              { maxRows: 1, maxPositions: 64, dtype: kvDtypeOf(packed) },
            ),
          );
          const { logits } = await runner.prefill(0, prompts[0]!, 0);
          expect(logits.every(Number.isFinite) && logits.some((x) => x !== 0)).toBe(true);
        } finally {
          await packed.release();
        }
      },
    );

    it.skipIf(!hasModel("fp32"))(
      "ortserve's attention kernel matches GroupQueryAttention to float rounding over a long context (fp32)",
      async () => {
        // fp32: with q4's int8-quantised activations (accuracy level 4) a rounding difference in one
        // layer's attention can move a quantisation step downstream, which is not the kernel's doing.
        const c = config();
        const fp32 = weightPath(MODEL_DIR, "fp32");
        const exact = nativeSessions!.create(fp32, {
          intraOpThreads: THREADS,
          interOpThreads: 1,
          cachedAttention: false,
        });
        const ours = nativeSessions!.create(fp32, {
          intraOpThreads: THREADS,
          interOpThreads: 1,
          cachedAttention: true,
        });
        try {
          // One prompt of 300 tokens in chunks of 64, two short ones, then ragged decode steps.
          const long = Array.from({ length: 300 }, (_, i) => prompts[i % 3]![i % prompts[i % 3]!.length]!);
          const runs = await compareRunners(
            { layers: c.numLayers, kvHeads: c.numKvHeads, headDim: c.headDim },
            exact,
            ours,
            [long, ...prompts],
            64,
            12,
            512,
            1e-4,
          );
          expect(runs).toBeGreaterThan(12);
        } finally {
          await exact.release();
          await ours.release();
        }
      },
    );
  });
});
