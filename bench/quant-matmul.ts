/**
 * One block-quantized projection in isolation: a single-op graph through the native session
 * (ortserve.BlockQuantMatMul), one row (a decode step's), timed many times; the best time is the
 * kernel's on a quiet core, so it compares two builds even on a busy machine where a whole decode
 * step's figures drift. Weights shaped as Qwen2.5-1.5B's: Q4_K-like (4-bit, offsets, coded
 * super-block scales) gate/up, Q6_K-like (8-bit quants within 32 of 128, scales per 16) down
 * projection and a slice of the output head, the gate/up as Q3_K and Q2_K (packed in 3 and 2
 * bits), and as float16 (a float16 file's, ortserve.HalfMatMul).
 *
 *   node bench/quant-matmul.ts [--root <source tree>] [--threads 2] [--reps 200] [--rows 1] [--cold] [--only Q6_K]
 *
 * `--cold` runs copies of each weight, one after another, adding up to more than the last-level
 * cache (1 GB), so the weights stream from memory as a whole model's do in a decode step: the
 * figure to set beside bench/bandwidth.ts's read bandwidth.
 * `--rows 16` times a 16-row step's projection instead (16 streams decoding: bound by arithmetic,
 * not by the weights' bytes).
 * `--root` loads another tree's native session and graph code (A/B two builds in one sitting).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { float32ToFp16 } from "../src/models/gguf/half.ts";

const { values } = parseArgs({
  options: {
    root: { type: "string", default: resolve(new URL(".", import.meta.url).pathname, "..") },
    threads: { type: "string", default: "2" },
    reps: { type: "string", default: "200" },
    rows: { type: "string", default: "1" },
    cold: { type: "boolean", default: false },
    only: { type: "string" },
  },
});
const root = resolve(values.root);
const { nativeSessions } = await import(join(root, "src/core/runner/native-session.ts"));
const { ExternalDataFile, GraphBuilder } = await import(
  join(root, "src/models/convert/onnx/graph-builder.ts")
);
const { OnnxDataType } = await import(join(root, "src/models/convert/onnx/proto.ts"));
const { withBlockSumRows, offsetMatrix } = await import(
  join(root, "src/models/convert/quantized-weights.ts")
);
const { Tensor } = await import("onnxruntime-node");
if (!nativeSessions?.blockQuantMatMul) throw new Error(`${root}: no native BlockQuantMatMul on this CPU`);

interface Case {
  name: string;
  /** 16: float16 weights (a float16 file's, ortserve.HalfMatMul). */
  bits: 4 | 8 | 16;
  n: number;
  k: number;
  scaleBlock: 16 | 32;
  offsets: boolean;
  /** 4-bit quants drawn from [lowest, lowest + span): Q3_K's (4, 8) and Q2_K's (8, 4) as converted. */
  nibbles?: { lowest: number; span: number };
}
const CASES: Case[] = [
  { name: "Q4_K gate+up 1536->17920", bits: 4, n: 17920, k: 1536, scaleBlock: 32, offsets: true },
  { name: "Q6_K down 8960->1536", bits: 8, n: 1536, k: 8960, scaleBlock: 16, offsets: false },
  { name: "Q6_K head slice 1536->32768", bits: 8, n: 32768, k: 1536, scaleBlock: 16, offsets: false },
  {
    name: "Q3_K gate+up 1536->17920",
    bits: 4,
    n: 17920,
    k: 1536,
    scaleBlock: 16,
    offsets: false,
    nibbles: { lowest: 4, span: 8 },
  },
  {
    name: "Q2_K gate+up 1536->17920",
    bits: 4,
    n: 17920,
    k: 1536,
    scaleBlock: 16,
    offsets: true,
    nibbles: { lowest: 8, span: 4 },
  },
  { name: "F16 gate+up 1536->17920", bits: 16, n: 17920, k: 1536, scaleBlock: 32, offsets: false },
];

let seed = 1;
const next = () => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return seed / 2 ** 32;
};

/** A K-quant-like weight: per column and super-block of 256 an fp16 factor times small integers. */
function weight(c: Case) {
  const blocks = c.k / c.scaleBlock;
  const nibble = () => c.nibbles!.lowest + Math.floor(next() * c.nibbles!.span);
  const data = Uint8Array.from({ length: (c.n * c.k * c.bits) / 8 }, () =>
    c.bits === 8
      ? 96 + Math.floor(next() * 64)
      : c.nibbles
        ? nibble() | (nibble() << 4)
        : Math.floor(next() * 256),
  );
  const perSuper = 256 / c.scaleBlock;
  const coded = (i: number, signed: boolean) => {
    const factor = Math.f16round(0.001 * (1 + (Math.floor(i / perSuper) % 7)));
    return factor * (signed ? Math.floor(next() * 64) - 32 : 1 + Math.floor(next() * 63));
  };
  const scales = Float32Array.from({ length: c.n * blocks }, (_, i) => coded(i, false));
  const offsets = c.offsets
    ? Float32Array.from({ length: c.n * blocks }, (_, i) => coded(i, true))
    : undefined;
  return { bits: c.bits, blockSize: c.scaleBlock, n: c.n, k: c.k, data, scales, offsets };
}

/** The graph of `copies` projections of x by the same weight values, outputs y0, y1, … */
function writeGraph(dir: string, c: Case, copies: number): string {
  const F = OnnxDataType.FLOAT;
  const external = new ExternalDataFile(join(dir, `${c.bits}-${c.n}.onnx_data`));
  const g = new GraphBuilder(external);
  const x = g.input("x", F, ["rows", c.k]);
  if (c.bits === 16) {
    // As the converter stores a float16 file's matrix: B [k, n] behind a Cast.
    const b = Uint16Array.from({ length: c.k * c.n }, () => float32ToFp16((next() - 0.5) * 0.1));
    for (let i = 0; i < copies; i++) {
      const weights = g.initializer(`b${i}`, OnnxDataType.FLOAT16, [c.k, c.n], b);
      g.node("MatMul", [x, g.op("Cast", [weights], `b${i}_float`, { to: F })], [`y${i}`]);
      g.output(`y${i}`, F, ["rows", c.n]);
    }
    external.close();
    const path = join(dir, `${c.bits}-${c.n}.onnx`);
    writeFileSync(path, g.encode({ producerVersion: "bench" }));
    return path;
  }
  const w = weight(c);
  const blocks = c.k / c.scaleBlock;
  const stored = w.offsets ? withBlockSumRows(w) : w;
  const attrs = { K: c.k, N: stored.n, bits: c.bits, block_size: c.scaleBlock, accuracy_level: 4 };
  for (let i = 0; i < copies; i++) {
    const data = g.initializer(
      `qweight${i}`,
      OnnxDataType.UINT8,
      [stored.n, blocks, (c.scaleBlock * c.bits) / 8],
      stored.data,
    );
    const scales = g.initializer(`scales${i}`, F, [stored.n, blocks], stored.scales);
    if (!w.offsets) g.node("MatMulNBits", [x, data, scales], [`y${i}`], attrs, "com.microsoft");
    else {
      const both = g.op("MatMulNBits", [x, data, scales], `both${i}`, attrs, "com.microsoft");
      const [y, sums] = g.node("Split", [both, g.int64s([c.n, blocks])], [`p${i}`, `sums${i}`], { axis: -1 });
      const offsets = g.initializer(`offsets${i}`, F, [blocks, c.n], offsetMatrix(w));
      g.node("Add", [y!, g.op("MatMul", [sums!, offsets], `corr${i}`)], [`y${i}`]);
    }
    g.output(`y${i}`, F, ["rows", c.n]);
  }
  external.close();
  const path = join(dir, `${c.bits}-${c.n}.onnx`);
  writeFileSync(path, g.encode({ producerVersion: "bench" }));
  return path;
}

const dir = mkdtempSync(join(tmpdir(), "ortserve-quant-matmul-bench-"));
try {
  for (const c of CASES.filter((c) => !values.only || c.name.startsWith(values.only))) {
    // Q4_K's 4.5 bits and Q6_K's 6.5 a weight, roughly, or 16: enough copies for 1 GB when cold.
    const bitsPerWeight = c.bits === 4 ? 4.5 : c.bits === 8 ? 6.5 : 16;
    const copies = values.cold ? Math.ceil(1e9 / ((c.n * c.k * bitsPerWeight) / 8)) : 1;
    const session = nativeSessions.create(writeGraph(dir, c, copies), {
      intraOpThreads: Number(values.threads),
      interOpThreads: 1,
      cachedAttention: true,
    });
    const rows = Number(values.rows);
    const x = Float32Array.from({ length: rows * c.k }, () => next() - 0.5);
    const feeds = { x: new Tensor("float32", x, [rows, c.k]) };
    const fetches = Object.fromEntries(Array.from({ length: copies }, (_, i) => [`y${i}`, null]));
    for (let i = 0; i < 10; i++) await session.run(feeds, fetches);
    const times: number[] = [];
    for (let i = 0; i < Number(values.reps); i++) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds, fetches);
      times.push(Number(process.hrtime.bigint() - t0) / 1e3);
    }
    times.sort((a, b) => a - b);
    const best = times[0]!;
    const bytes = session.packedWeightBytes as number;
    console.log(
      `${c.name}${copies > 1 ? ` x${copies}` : ""}: ${(bytes / 1e6).toFixed(1)} MB packed, best ${best.toFixed(0)} µs ` +
        `(${(bytes / best / 1e3).toFixed(1)} GB/s, ${((rows * c.n * c.k * copies) / best / 1e3).toFixed(1)} G multiply-adds/s), median ${times[times.length >> 1]!.toFixed(0)} µs`,
    );
    await session.release();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
