/**
 * ortserve's attention operator (native/src/attention.cc) against ONNX Runtime's
 * GroupQueryAttention on a graph that holds nothing else, at SmolLM2's head shape (9 query heads
 * over 3 KV heads of 64) and contexts of many 64-position tiles: ragged decode steps spread over
 * the threads, prefill chunks after cached positions, and a step too small to leave the calling
 * thread; with a float32, a float16 and an 8-bit cache; and with a sliding window (gemma3's local
 * layers) that starts inside a tile and a chunk.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InferenceSession, Tensor } from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOKEN_ROWS } from "../../src/core/runner/attention-graph.ts";
import { type NativeDecoderSession, nativeSessions } from "../../src/core/runner/native-session.ts";
import { ExternalDataFile, GraphBuilder } from "../../src/models/convert/onnx/graph-builder.ts";
import { OnnxDataType } from "../../src/models/convert/onnx/proto.ts";
import { relativeGap } from "./relative-gap.ts";
import { runAll } from "./run-all.ts";
import { values } from "./seeded-values.ts";

const F = OnnxDataType.FLOAT;
const HEADS = 9;
const KV_HEADS = 3;
const HEAD_DIM = 64;
const CAPACITY = 1200;
const PACKED = (HEADS + 2 * KV_HEADS) * HEAD_DIM;

/** Rounded to the nearest binary16 value, as a float16 cache holds it. */
function halfRounded(x: Float32Array): Float32Array {
  return Float32Array.from(new Float16Array(x));
}

/**
 * `localWindow`: GroupQueryAttention's local_window_size (positions a token sees, its own
 * included); `capacity`: the cache's positions (a sliding window's ring may hold fewer than the
 * rotary caches' CAPACITY).
 */
function writeGraph(dir: string, localWindow = -1, capacity = CAPACITY): string {
  const name = `attention${localWindow}-${capacity}`;
  const external = new ExternalDataFile(join(dir, `${name}.onnx_data`));
  const g = new GraphBuilder(external);
  const query = g.input("query", F, ["batch", "sequence", PACKED]);
  const cacheShape = ["batch", KV_HEADS, capacity, HEAD_DIM];
  const pastKey = g.input("past_key_values.0.key", F, cacheShape);
  const pastValue = g.input("past_key_values.0.value", F, cacheShape);
  const seqlensK = g.input("seqlens_k", OnnxDataType.INT32, ["batch"]);
  const totalLength = g.input("total_sequence_length", OnnxDataType.INT32, []);
  const positions = g.input("position_ids", OnnxDataType.INT64, ["batch", "sequence"]);
  // Rotary caches as the converter writes them: angle = position / 10000^(2i / headDim).
  const half = HEAD_DIM / 2;
  const angles = Float32Array.from({ length: CAPACITY * half }, (_, k) => {
    const [p, i] = [Math.floor(k / half), k % half];
    return p / 10000 ** ((2 * i) / HEAD_DIM);
  });
  const cos = g.initializer("cos_cache", F, [CAPACITY, half], angles.map(Math.cos));
  const sin = g.initializer("sin_cache", F, [CAPACITY, half], angles.map(Math.sin));
  g.node(
    "GroupQueryAttention",
    [query, "", "", pastKey, pastValue, seqlensK, totalLength, cos, sin, positions],
    ["attn", "present.0.key", "present.0.value"],
    {
      num_heads: HEADS,
      kv_num_heads: KV_HEADS,
      scale: { float: 1 / Math.sqrt(HEAD_DIM) },
      do_rotary: 1,
      rotary_interleaved: 0,
      local_window_size: localWindow,
    },
    "com.microsoft",
  );
  g.output("attn", F, ["batch", "sequence", HEADS * HEAD_DIM]);
  g.output("present.0.key", F, cacheShape);
  g.output("present.0.value", F, cacheShape);
  external.close();
  const path = join(dir, `${name}.onnx`);
  writeFileSync(path, g.encode({ producerVersion: "test" }));
  return path;
}

/** One step's feeds: `sequence` new tokens after `past[b]` cached positions in each row. */
function feeds(past: number[], sequence: number, seed: number, half: boolean): Record<string, Tensor> {
  const batch = past.length;
  const cache = (s: number) => {
    const x = values(batch * KV_HEADS * CAPACITY * HEAD_DIM, s, 2);
    return half ? halfRounded(x) : x;
  };
  const cacheDims = [batch, KV_HEADS, CAPACITY, HEAD_DIM];
  return {
    query: new Tensor("float32", values(batch * sequence * PACKED, seed, 1.5), [batch, sequence, PACKED]),
    "past_key_values.0.key": new Tensor("float32", cache(seed + 1), cacheDims),
    "past_key_values.0.value": new Tensor("float32", cache(seed + 2), cacheDims),
    seqlens_k: new Tensor(
      "int32",
      Int32Array.from(past, (p) => p + sequence - 1),
      [batch],
    ),
    total_sequence_length: new Tensor("int32", Int32Array.of(Math.max(...past) + sequence), []),
    position_ids: new Tensor(
      "int64",
      BigInt64Array.from({ length: batch * sequence }, (_, i) =>
        BigInt(past[Math.floor(i / sequence)]! + (i % sequence)),
      ),
      [batch, sequence],
    ),
  };
}

/** The same feeds with the cache as float16, as the half-cache operator takes them. */
function asHalfCache(f: Record<string, Tensor>): Record<string, Tensor> {
  const out = { ...f };
  for (const name of ["past_key_values.0.key", "past_key_values.0.value"]) {
    const t = f[name]!;
    // onnxruntime-node takes float16 data as its bits.
    const bits = new Uint16Array(new Float16Array(t.data as Float32Array).buffer);
    out[name] = new Tensor("float16", bits, t.dims);
  }
  return out;
}

/** The 8-bit cache's width: a position's HEAD_DIM bytes and a binary16 scale per block of 32. */
const INT8_BLOCK = 32;
const INT8_WIDTH = HEAD_DIM + 2 * (HEAD_DIM / INT8_BLOCK);

/**
 * A float cache as the 8-bit cache holds it (each block of 32 values of a position: its largest
 * magnitude maps to 127, the scale kept in binary16), and the floats those bytes stand for, which
 * GroupQueryAttention is given to compare against.
 */
function int8Cache(x: Float32Array): { bytes: Int8Array; floats: Float32Array } {
  const positions = x.length / HEAD_DIM;
  const bytes = new Int8Array(positions * INT8_WIDTH);
  const view = new DataView(bytes.buffer);
  const dequantized = new Float32Array(x.length);
  for (let p = 0; p < positions; p++)
    for (let b = 0; b < HEAD_DIM / INT8_BLOCK; b++) {
      const at = p * HEAD_DIM + b * INT8_BLOCK;
      const block = x.subarray(at, at + INT8_BLOCK);
      const scale = new Float16Array([block.reduce((m, v) => Math.max(m, Math.abs(v)), 0) / 127])[0]!;
      for (let d = 0; d < INT8_BLOCK; d++) {
        const q = scale > 0 ? Math.round(block[d]! / scale) : 0;
        bytes[p * INT8_WIDTH + b * INT8_BLOCK + d] = q;
        dequantized[at + d] = Math.fround(q * scale);
      }
      view.setFloat16(p * INT8_WIDTH + HEAD_DIM + 2 * b, scale, true);
    }
  return { bytes, floats: dequantized };
}

/** Feeds for the 8-bit operator, and the same step for GroupQueryAttention over what it holds. */
function asInt8Cache(f: Record<string, Tensor>): {
  ours: Record<string, Tensor>;
  exact: Record<string, Tensor>;
} {
  const ours = { ...f };
  const exact = { ...f };
  for (const name of ["past_key_values.0.key", "past_key_values.0.value"]) {
    const t = f[name]!;
    const { bytes, floats } = int8Cache(t.data as Float32Array);
    ours[name] = new Tensor("int8", bytes, [...t.dims.slice(0, 3), INT8_WIDTH]);
    exact[name] = new Tensor("float32", floats, t.dims);
  }
  return { ours, exact };
}

/** The floats an 8-bit present cache stands for, laid out as a float cache. */
function int8Floats(t: Tensor): Float32Array {
  const bytes = t.data as Int8Array;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const positions = bytes.length / INT8_WIDTH;
  const out = new Float32Array(positions * HEAD_DIM);
  for (let p = 0; p < positions; p++)
    for (let d = 0; d < HEAD_DIM; d++) {
      const scale = view.getFloat16(p * INT8_WIDTH + HEAD_DIM + 2 * Math.floor(d / INT8_BLOCK), true);
      out[p * HEAD_DIM + d] = bytes[p * INT8_WIDTH + d]! * scale;
    }
  return out;
}

const floats = (t: Tensor) => t.data as Float32Array;

/** A present cache's positions each row holds after the step ([0, length) of every KV head). */
function heldPositions(t: Tensor, lengths: number[]): Float32Array {
  const x = floats(t);
  const parts: Float32Array[] = [];
  for (const [b, length] of lengths.entries())
    for (let h = 0; h < KV_HEADS; h++) {
      const at = (b * KV_HEADS + h) * CAPACITY * HEAD_DIM;
      parts.push(x.subarray(at, at + length * HEAD_DIM));
    }
  return Float32Array.from(parts.flatMap((p) => [...p]));
}

describe.skipIf(!nativeSessions)("ortserve attention operator over long contexts", () => {
  let dir: string;
  let exact: InferenceSession;
  let ours: NativeDecoderSession;
  let oursHalf: NativeDecoderSession;
  let oursInt8: NativeDecoderSession;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "ortserve-attention-op-"));
    const path = writeGraph(dir);
    exact = await InferenceSession.create(path, { intraOpNumThreads: 2 });
    const options = { intraOpThreads: 2, interOpThreads: 1, cachedAttention: true } as const;
    ours = nativeSessions!.create(path, options);
    oursHalf = nativeSessions!.create(path, { ...options, kvCacheDtype: "float16" });
    oursInt8 = nativeSessions!.create(path, { ...options, kvCacheDtype: "int8" });
  });
  afterAll(async () => {
    await exact?.release();
    await ours?.release();
    await oursHalf?.release();
    await oursInt8?.release();
    rmSync(dir, { recursive: true, force: true });
  });

  const steps: [string, number[], number][] = [
    ["ragged decode steps", [1000, 300, 5], 1],
    ["a prefill chunk after 700 cached positions", [700], 40],
    ["a long prefill chunk", [300], 600],
    ["a step small enough to stay on the calling thread", [3, 10], 1],
  ];
  for (const [name, past, sequence] of steps)
    it(`matches GroupQueryAttention: ${name}`, async () => {
      const f = feeds(past, sequence, past.length * 31 + sequence, false);
      const want = await exact.run(f);
      const got = await runAll(ours, f);
      expect(got.attn!.dims).toEqual([past.length, sequence, HEADS * HEAD_DIM]);
      expect(relativeGap(floats(want.attn!), floats(got.attn!))).toBeLessThan(1e-5);
      // Beyond each row's length GroupQueryAttention leaves its own present unspecified.
      const lengths = past.map((p) => p + sequence);
      for (const name of ["present.0.key", "present.0.value"])
        expect(
          relativeGap(heldPositions(want[name]!, lengths), heldPositions(got[name]!, lengths)),
        ).toBeLessThan(1e-6);

      // A float16 cache: GroupQueryAttention over the same half-rounded cache, so only the new
      // positions' rounding separates the two.
      const gotHalf = await runAll(oursHalf, asHalfCache(f));
      expect(relativeGap(floats(want.attn!), floats(gotHalf.attn!))).toBeLessThan(2e-3);

      // An 8-bit cache: GroupQueryAttention over the floats the cached bytes stand for, so again
      // only the new positions' rounding (to 1/254 of their block's largest magnitude) separates the two;
      // and the present cache holds what GroupQueryAttention's does, to that rounding.
      const int8 = asInt8Cache(f);
      const wantInt8 = await exact.run(int8.exact);
      const gotInt8 = await runAll(oursInt8, int8.ours);
      expect(gotInt8["present.0.key"]!.dims).toEqual([past.length, KV_HEADS, CAPACITY, INT8_WIDTH]);
      expect(relativeGap(floats(wantInt8.attn!), floats(gotInt8.attn!))).toBeLessThan(5e-3);
      for (const name of ["present.0.key", "present.0.value"]) {
        const present = new Tensor("float32", int8Floats(gotInt8[name]!), wantInt8[name]!.dims);
        expect(
          relativeGap(heldPositions(wantInt8[name]!, lengths), heldPositions(present, lengths)),
        ).toBeLessThan(1e-2);
      }
    });

  it("gives ragged rows (decode rows and a prompt chunk in one pass, a row in one run or two) the bits of separate runs", async () => {
    const decode = feeds([1000, 300], 1, 11, false);
    const prefill = feeds([700], 40, 12, false);
    const cat = (a: Tensor, b: Tensor, dims: number[]) => {
      const x = new Float32Array(a.size + b.size);
      x.set(floats(a));
      x.set(floats(b), a.size);
      return new Tensor("float32", x, dims);
    };
    const cacheDims = [3, KV_HEADS, CAPACITY, HEAD_DIM];
    // The engine's order: the prompt chunk's tokens (row 2), then one token of each decode row.
    const ragged = {
      query: cat(prefill.query!, decode.query!, [1, 42, PACKED]),
      "past_key_values.0.key": cat(
        decode["past_key_values.0.key"]!,
        prefill["past_key_values.0.key"]!,
        cacheDims,
      ),
      "past_key_values.0.value": cat(
        decode["past_key_values.0.value"]!,
        prefill["past_key_values.0.value"]!,
        cacheDims,
      ),
      seqlens_k: new Tensor("int32", Int32Array.of(1000, 300, 739), [3]),
      total_sequence_length: new Tensor("int32", Int32Array.of(740), []),
      position_ids: new Tensor(
        "int64",
        BigInt64Array.from([...(prefill.position_ids!.data as BigInt64Array), 1000n, 300n]),
        [1, 42],
      ),
      [TOKEN_ROWS]: new Tensor("int64", BigInt64Array.from([...Array(40).fill(2n), 0n, 1n]), [42]),
    };
    const got = await runAll(ours, ragged);
    const [wantDecode, wantPrefill] = [await runAll(ours, decode), await runAll(ours, prefill)];
    const bits = (t: Tensor) => Buffer.from(floats(t).buffer, floats(t).byteOffset, floats(t).byteLength);
    expect(got.attn!.dims).toEqual([1, 42, HEADS * HEAD_DIM]);
    expect(bits(got.attn!).equals(Buffer.concat([bits(wantPrefill.attn!), bits(wantDecode.attn!)]))).toBe(
      true,
    );
    for (const name of ["present.0.key", "present.0.value"])
      expect(
        bits(got[name]!).equals(Buffer.concat([bits(wantDecode[name]!), bits(wantPrefill[name]!)])),
      ).toBe(true);

    // The chunk's last token among the one-token rows, in row order (the engine's order, so the
    // logits kept are a suffix): row 2 in two runs, the second continuing the first's positions.
    const positions = prefill.position_ids!.data as BigInt64Array;
    const rowOrder = [...Array(39).keys(), 40, 41, 39];
    const reordered = {
      ...ragged,
      query: new Tensor(
        "float32",
        Float32Array.from(
          rowOrder.flatMap((t) => [...floats(ragged.query).subarray(t * PACKED, (t + 1) * PACKED)]),
        ),
        [1, 42, PACKED],
      ),
      position_ids: new Tensor(
        "int64",
        BigInt64Array.from([...positions.subarray(0, 39), 1000n, 300n, 739n]),
        [1, 42],
      ),
      [TOKEN_ROWS]: new Tensor("int64", BigInt64Array.from([...Array(39).fill(2n), 0n, 1n, 2n]), [42]),
    };
    const split = await runAll(ours, reordered);
    const width = HEADS * HEAD_DIM;
    const attnRows = (t: Tensor, order: number[]) =>
      Buffer.concat(order.map((i) => bits(t).subarray(i * width * 4, (i + 1) * width * 4)));
    expect(attnRows(split.attn!, [...Array(42).keys()]).equals(attnRows(got.attn!, rowOrder))).toBe(true);
    for (const name of ["present.0.key", "present.0.value"])
      expect(bits(split[name]!).equals(bits(got[name]!))).toBe(true);

    // Refused: a row's second run not continuing its positions, and a last position the mask
    // (seqlens_k) does not give.
    const gap = {
      ...reordered,
      position_ids: new Tensor(
        "int64",
        BigInt64Array.from([...positions.subarray(0, 39), 1000n, 300n, 745n]),
        [1, 42],
      ),
    };
    await expect(runAll(ours, gap)).rejects.toThrow(/do not continue its positions/);
    const short = { ...ragged, seqlens_k: new Tensor("int32", Int32Array.of(1000, 300, 740), [3]) };
    await expect(runAll(ours, short)).rejects.toThrow(/disagrees with seqlens_k/);
  });

  // Each cache type has kernels of its own (with AVX-512VL the float16 and int8 ones take several
  // queries a pass: a decode step's query heads, a prefill block's tokens).
  const caches: [
    string,
    () => NativeDecoderSession,
    (f: Record<string, Tensor>) => Record<string, Tensor>,
  ][] = [
    ["float32", () => ours, (f) => f],
    ["float16", () => oursHalf, asHalfCache],
    ["int8", () => oursInt8, (f) => asInt8Cache(f).ours],
  ];
  for (const [dtype, session, cacheOf] of caches)
    it(`gives a token the same floats as the last of a prefill chunk and as a decode step (${dtype} cache)`, async () => {
      // A 600-token prefill after 300 cached positions, then its last token again as a decode step
      // over the cache that prefill left: how the work was split must not change a token's floats.
      const f = cacheOf(feeds([300], 600, 5, false));
      const prefill = await runAll(session(), f);
      const last = floats(f.query!).slice(599 * PACKED);
      const decode = await runAll(session(), {
        query: new Tensor("float32", last, [1, 1, PACKED]),
        "past_key_values.0.key": prefill["present.0.key"]!,
        "past_key_values.0.value": prefill["present.0.value"]!,
        seqlens_k: new Tensor("int32", Int32Array.of(899), [1]),
        total_sequence_length: new Tensor("int32", Int32Array.of(900), []),
        position_ids: new Tensor("int64", BigInt64Array.of(899n), [1, 1]),
      });
      const want = floats(prefill.attn!).slice(599 * HEADS * HEAD_DIM);
      expect(Buffer.from(floats(decode.attn!).buffer).equals(Buffer.from(want.buffer))).toBe(true);
    });
});

describe.skipIf(!nativeSessions)("ortserve attention operator with a sliding window", () => {
  // 300 positions: a token at 1,000 sees [701, 1001), starting inside a tile and a chunk.
  const LOCAL_WINDOW = 300;
  let dir: string;
  let exact: InferenceSession;
  let full: NativeDecoderSession;
  const sessions: Record<string, NativeDecoderSession> = {};
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "ortserve-attention-window-"));
    const path = writeGraph(dir, LOCAL_WINDOW);
    exact = await InferenceSession.create(path, { intraOpNumThreads: 2 });
    const options = { intraOpThreads: 2, interOpThreads: 1, cachedAttention: true } as const;
    for (const dtype of ["float32", "float16", "int8"] as const)
      sessions[dtype] = nativeSessions!.create(path, { ...options, kvCacheDtype: dtype });
    full = nativeSessions!.create(writeGraph(dir), options);
  });
  afterAll(async () => {
    await exact?.release();
    for (const s of Object.values(sessions)) await s.release();
    await full?.release();
    rmSync(dir, { recursive: true, force: true });
  });

  const steps: [string, number[], number][] = [
    ["ragged decode steps, some rows shorter than the window", [1000, 300, 5, 299], 1],
    ["a prefill chunk after 700 cached positions", [700], 40],
    ["a long prefill chunk", [300], 600],
  ];
  for (const [name, past, sequence] of steps)
    it(`matches GroupQueryAttention's local_window_size: ${name}`, async () => {
      const f = feeds(past, sequence, past.length * 17 + sequence, false);
      const want = await exact.run(f);
      const got = await runAll(sessions.float32!, f);
      expect(relativeGap(floats(want.attn!), floats(got.attn!))).toBeLessThan(1e-5);
      // The window matters: every position attended gives another result.
      const all = await runAll(full, f);
      expect(relativeGap(floats(all.attn!), floats(got.attn!))).toBeGreaterThan(1e-2);
      const gotHalf = await runAll(sessions.float16!, asHalfCache(f));
      expect(relativeGap(floats(want.attn!), floats(gotHalf.attn!))).toBeLessThan(2e-3);
      const int8 = asInt8Cache(f);
      const wantInt8 = await exact.run(int8.exact);
      const gotInt8 = await runAll(sessions.int8!, int8.ours);
      expect(relativeGap(floats(wantInt8.attn!), floats(gotInt8.attn!))).toBeLessThan(5e-3);
    });

  it("reads no position before a token's window", async () => {
    // Positions outside every window poisoned with NaN: the result stays finite and the same.
    const f = feeds([1000], 1, 3, false);
    const want = floats((await runAll(sessions.float32!, f)).attn!);
    const poisoned = { ...f };
    for (const name of ["past_key_values.0.key", "past_key_values.0.value"]) {
      const x = Float32Array.from(floats(f[name]!));
      for (let h = 0; h < KV_HEADS; h++)
        x.fill(Number.NaN, h * CAPACITY * HEAD_DIM, (h * CAPACITY + 701) * HEAD_DIM);
      poisoned[name] = new Tensor("float32", x, f[name]!.dims);
    }
    const got = floats((await runAll(sessions.float32!, poisoned)).attn!);
    expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer))).toBe(true);
  });

  describe("with the cache a ring of 512 positions", () => {
    const RING = 512;
    let ring: NativeDecoderSession;
    beforeAll(() => {
      ring = nativeSessions!.create(writeGraph(dir, LOCAL_WINDOW, RING), {
        intraOpThreads: 2,
        interOpThreads: 1,
        cachedAttention: true,
        kvCacheDtype: "float32",
      });
    });
    afterAll(async () => {
      await ring?.release();
    });

    /** Row b's positions [past - RING, past) of a linear cache, each at row position % RING. */
    function asRing(t: Tensor, past: number[]): Tensor {
      const x = floats(t);
      const out = new Float32Array(past.length * KV_HEADS * RING * HEAD_DIM);
      for (const [b, length] of past.entries())
        for (let h = 0; h < KV_HEADS; h++)
          for (let p = Math.max(0, length - RING); p < length; p++) {
            const from = ((b * KV_HEADS + h) * CAPACITY + p) * HEAD_DIM;
            out.set(x.subarray(from, from + HEAD_DIM), ((b * KV_HEADS + h) * RING + (p % RING)) * HEAD_DIM);
          }
      return new Tensor("float32", out, [past.length, KV_HEADS, RING, HEAD_DIM]);
    }

    const ringSteps: [string, number[], number][] = [
      ["ragged decode steps, rows past the ring and inside it", [1000, 700, 511, 5], 1],
      ["a prefill chunk that wraps the ring", [700, 490], 40],
      ["a prefill chunk longer than the ring holds beside the window (attended in pieces)", [300], 600],
    ];
    for (const [name, past, sequence] of ringSteps)
      it(`gives the same floats as the whole cache, and keeps each row's last positions: ${name}`, async () => {
        const f = feeds(past, sequence, past.length * 29 + sequence, false);
        const want = await runAll(sessions.float32!, f);
        const got = await runAll(ring, {
          ...f,
          "past_key_values.0.key": asRing(f["past_key_values.0.key"]!, past),
          "past_key_values.0.value": asRing(f["past_key_values.0.value"]!, past),
        });
        expect(relativeGap(floats(want.attn!), floats(got.attn!)), "attention output").toBe(0);
        const after = past.map((p) => p + sequence);
        for (const kind of ["key", "value"]) {
          // Compared where the ring holds live positions: each row's last min(length, RING).
          const wantHeld = heldRing(asRing(want[`present.0.${kind}`]!, after), after);
          const gotHeld = heldRing(got[`present.0.${kind}`]!, after);
          expect(relativeGap(wantHeld, gotHeld), `present ${kind}`).toBe(0);
        }
      });

    /** The ring rows each row's last min(length, RING) positions occupy. */
    function heldRing(t: Tensor, lengths: number[]): Float32Array {
      const x = floats(t);
      const parts: number[] = [];
      for (const [b, length] of lengths.entries())
        for (let h = 0; h < KV_HEADS; h++)
          for (let p = Math.max(0, length - RING); p < length; p++) {
            const at = ((b * KV_HEADS + h) * RING + (p % RING)) * HEAD_DIM;
            parts.push(...x.subarray(at, at + HEAD_DIM));
          }
      return Float32Array.from(parts);
    }

    it("refuses a row past a ring that is not a whole number of 256-position chunks", async () => {
      const odd = nativeSessions!.create(writeGraph(dir, LOCAL_WINDOW, 500), {
        intraOpThreads: 1,
        interOpThreads: 1,
        cachedAttention: true,
        kvCacheDtype: "float32",
      });
      try {
        const f = feeds([600], 1, 11, false);
        const cacheDims = [1, KV_HEADS, 500, HEAD_DIM];
        await expect(
          runAll(odd, {
            ...f,
            "past_key_values.0.key": new Tensor(
              "float32",
              new Float32Array(KV_HEADS * 500 * HEAD_DIM),
              cacheDims,
            ),
            "past_key_values.0.value": new Tensor(
              "float32",
              new Float32Array(KV_HEADS * 500 * HEAD_DIM),
              cacheDims,
            ),
          }),
        ).rejects.toThrow(/seqlens_k is outside the cache/);
      } finally {
        await odd.release();
      }
    });
  });

  for (const dtype of ["float32", "float16", "int8"])
    it(`gives a token the same floats as the last of a prefill chunk and as a decode step (${dtype} cache)`, async () => {
      const f0 = feeds([300], 600, 5, false);
      const f = dtype === "float16" ? asHalfCache(f0) : dtype === "int8" ? asInt8Cache(f0).ours : f0;
      const session = sessions[dtype]!;
      const prefill = await runAll(session, f);
      const decode = await runAll(session, {
        query: new Tensor("float32", floats(f.query!).slice(599 * PACKED), [1, 1, PACKED]),
        "past_key_values.0.key": prefill["present.0.key"]!,
        "past_key_values.0.value": prefill["present.0.value"]!,
        seqlens_k: new Tensor("int32", Int32Array.of(899), [1]),
        total_sequence_length: new Tensor("int32", Int32Array.of(900), []),
        position_ids: new Tensor("int64", BigInt64Array.of(899n), [1, 1]),
      });
      const want = floats(prefill.attn!).slice(599 * HEADS * HEAD_DIM);
      expect(Buffer.from(floats(decode.attn!).buffer).equals(Buffer.from(want.buffer))).toBe(true);
    });
});
