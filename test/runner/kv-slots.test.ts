import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { KvBlock } from "../../src/core/runner/kv-rows.ts";
import { cacheRowElements, KvSlots, ringPositions, SHRINK_GRACE_MS } from "../../src/core/runner/kv-slots.ts";
import { nativeSessions } from "../../src/core/runner/native-session.ts";

const shape = { layers: 2, kvHeads: 3, headDim: 4 };

/** Fills positions [0, length) of a row with values that name row, layer buffer and position. */
function fill(kv: KvSlots, row: number, length: number): void {
  const { feeds } = kv.bind(0, row + 1);
  Object.values(feeds).forEach((t, b) => {
    const data = t.data as Float32Array;
    const span = kv.capacity * shape.headDim;
    for (let h = 0; h < shape.kvHeads; h++)
      for (let p = 0; p < length; p++)
        for (let d = 0; d < shape.headDim; d++)
          data[(row * shape.kvHeads + h) * span + p * shape.headDim + d] = row * 1000 + b * 100 + p + d / 10;
  });
}

/**
 * Row 1's first 5 positions (written by the caller) survive growth, and reach rows 3, 2 and 0
 * intact through a saved block, a row copy and a row move.
 */
function expectKeptThroughGrowthBlocksAndMoves(
  kv: KvSlots,
  read: (row: number, length: number) => number[],
): void {
  const before = read(1, 5);
  kv.ensurePositions(40);
  expect(read(1, 5)).toEqual(before);
  const block = kv.saveBlock(1, 0, 5);
  expect(block.bytes).toBe(5 * kv.bytesPerToken);
  kv.loadBlock(block, 3, 0);
  expect(read(3, 5)).toEqual(before);
  kv.copyRow(3, 2, 5);
  expect(read(2, 5)).toEqual(before);
  kv.moveRows([{ from: 3, to: 0, length: 5 }]);
  expect(read(0, 5)).toEqual(before);
}

function positions(kv: KvSlots, row: number, length: number): number[] {
  const { feeds } = kv.bind(0, row + 1);
  const out: number[] = [];
  for (const t of Object.values(feeds)) {
    const data = t.data as Float32Array;
    const span = kv.capacity * shape.headDim;
    for (let h = 0; h < shape.kvHeads; h++)
      out.push(
        ...data.subarray(
          (row * shape.kvHeads + h) * span,
          (row * shape.kvHeads + h) * span + length * shape.headDim,
        ),
      );
  }
  return out;
}

describe("KvSlots (the batch KV cache behind KvRows)", () => {
  it("feeds and fetches the same memory, one past and one present per layer", () => {
    const kv = new KvSlots(shape, { maxRows: 4, maxPositions: 64, initialPositions: 8 });
    const { feeds, fetches } = kv.bind(0, 2);
    expect(Object.keys(feeds)).toEqual([
      "past_key_values.0.key",
      "past_key_values.0.value",
      "past_key_values.1.key",
      "past_key_values.1.value",
    ]);
    expect(feeds["past_key_values.1.value"]!.dims).toEqual([2, 3, 8, 4]);
    expect(fetches["present.1.value"]!.data).toBe(feeds["past_key_values.1.value"]!.data);
  });

  it("keeps every row's positions when it grows rows and positions", () => {
    const kv = new KvSlots(shape, { maxRows: 8, maxPositions: 64, initialPositions: 8 });
    fill(kv, 1, 5);
    const before = positions(kv, 1, 5);
    kv.ensurePositions(40);
    kv.ensureRows(7);
    expect(kv.capacity).toBeGreaterThanOrEqual(40);
    expect(positions(kv, 1, 5)).toEqual(before);
    expect(() => kv.ensurePositions(65)).toThrow(/exceed/);
  });

  it("saves and loads blocks, and moves rows reading every source first", () => {
    const kv = new KvSlots(shape, { maxRows: 4, maxPositions: 64, initialPositions: 8 });
    fill(kv, 0, 6);
    fill(kv, 1, 6);
    const row0 = positions(kv, 0, 6);
    const row1 = positions(kv, 1, 6);
    const block = kv.saveBlock(0, 2, 3);
    expect(block.bytes).toBe(2 * 2 * 3 * 3 * 4 * 4);
    kv.loadBlock(block, 2, 0);
    expect(positions(kv, 2, 3)).toEqual(
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11].flatMap((s) =>
        row0.slice(s * 6 * shape.headDim + 2 * shape.headDim, s * 6 * shape.headDim + 5 * shape.headDim),
      ),
    );
    // A swap: each destination gets the other's old content.
    kv.moveRows([
      { from: 0, to: 1, length: 6 },
      { from: 1, to: 0, length: 6 },
    ]);
    expect(positions(kv, 0, 6)).toEqual(row1);
    expect(positions(kv, 1, 6)).toEqual(row0);
  });

  it("saves blocks into pooled slots: a released block's slot holds the next block saved", () => {
    const kv = new KvSlots(shape, { maxRows: 4, maxPositions: 64, initialPositions: 8 });
    fill(kv, 0, 6);
    fill(kv, 1, 6);
    const first = kv.saveBlock(0, 0, 4) as KvBlock & { data: Float32Array };
    const second = kv.saveBlock(1, 0, 4) as KvBlock & { data: Float32Array };
    // Two live blocks never share memory.
    expect(first.data.buffer).toBe(second.data.buffer);
    expect(first.data.byteOffset).not.toBe(second.data.byteOffset);
    const at = first.data.byteOffset;
    first.release();
    expect(() => kv.loadBlock(first, 2, 0)).toThrow(/after its release/);
    const third = kv.saveBlock(1, 2, 4) as KvBlock & { data: Float32Array };
    expect(third.data.buffer).toBe(first.data.buffer);
    expect(third.data.byteOffset).toBe(at);
    // The reused slot holds the new block (row 1, positions 2-5), not the old one.
    kv.loadBlock(third, 3, 0);
    const row1 = positions(kv, 1, 6);
    expect(positions(kv, 3, 4)).toEqual(
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11].flatMap((s) =>
        row1.slice(s * 6 * shape.headDim + 2 * shape.headDim, s * 6 * shape.headDim + 6 * shape.headDim),
      ),
    );
  });

  it("gives memory back once far more than the live rows use was held for a while, keeping their data", () => {
    let now = 0;
    const kv = new KvSlots(shape, { maxRows: 16, maxPositions: 2048, initialPositions: 8, now: () => now });
    fill(kv, 1, 5);
    const before = positions(kv, 1, 5);
    kv.ensureRows(16);
    kv.ensurePositions(1500);
    const big = kv.bytes;
    // Within twice the need: nothing moves.
    kv.shrinkTo(16, 1000);
    expect(kv.bytes).toBe(big);
    kv.shrinkTo(2, 5);
    // Not yet: the next request may need it all again.
    now += SHRINK_GRACE_MS - 1;
    kv.shrinkTo(2, 5);
    expect(kv.bytes).toBe(big);
    // Needed again for a moment: the grace period starts over.
    kv.shrinkTo(16, 1000);
    now += 1;
    kv.shrinkTo(2, 5);
    expect(kv.bytes).toBe(big);
    now += SHRINK_GRACE_MS;
    kv.shrinkTo(2, 5);
    expect(kv.bytes).toBeLessThan(big / 50);
    expect(kv.capacity).toBeGreaterThanOrEqual(5);
    expect(positions(kv, 1, 5)).toEqual(before);
  });

  it("keeps a float16 cache in half the bytes, through growth, blocks and row moves", () => {
    const kv = new KvSlots(shape, { maxRows: 4, maxPositions: 64, initialPositions: 8, dtype: "float16" });
    const f32 = new KvSlots(shape, { maxRows: 4, maxPositions: 64, initialPositions: 8 });
    expect(kv.bytesPerToken * 2).toBe(f32.bytesPerToken);
    expect(kv.bytes * 2).toBe(f32.bytes);
    const { feeds, fetches } = kv.bind(0, 2);
    expect(feeds["past_key_values.0.key"]!.type).toBe("float16");
    // The same memory (onnxruntime-common wraps float16 data in its own Float16Array views).
    const past = feeds["past_key_values.0.key"]!.data as ArrayBufferView;
    const present = fetches["present.0.key"]!.data as ArrayBufferView;
    expect([present.buffer, present.byteOffset, present.byteLength]).toEqual([
      past.buffer,
      past.byteOffset,
      past.byteLength,
    ]);
    // Small integers are exact in binary16.
    const write = (row: number, length: number) =>
      Object.values(kv.bind(0, row + 1).feeds).forEach((t, b) => {
        const data = t.data as unknown as ArrayLike<number> & { [i: number]: number };
        const span = kv.capacity * shape.headDim;
        for (let h = 0; h < shape.kvHeads; h++)
          for (let p = 0; p < length; p++)
            for (let d = 0; d < shape.headDim; d++)
              data[(row * shape.kvHeads + h) * span + p * shape.headDim + d] = row * 100 + b * 10 + p + d;
      });
    const read = (row: number, length: number) =>
      Object.values(kv.bind(0, row + 1).feeds).flatMap((t) => {
        const data = t.data as unknown as ArrayLike<number>;
        const span = kv.capacity * shape.headDim;
        return Array.from({ length: shape.kvHeads }, (_, h) =>
          Array.from(data as ArrayLike<number>).slice(
            (row * shape.kvHeads + h) * span,
            (row * shape.kvHeads + h) * span + length * shape.headDim,
          ),
        ).flat();
      });
    write(1, 5);
    expect(read(1, 5)[shape.headDim + 1]).toBe(100 + 1 + 1);
    expectKeptThroughGrowthBlocksAndMoves(kv, read);
  });
  it("keeps an int8 cache as head_dim bytes and a 2-byte scale per block of 32, through growth, blocks and moves", () => {
    // head_dim 4 is one block (one scale); the model's 64 are two.
    expect(cacheRowElements("int8", 64)).toBe(68);
    expect(cacheRowElements("int8", 16)).toBe(18);
    const kv = new KvSlots(shape, { maxRows: 4, maxPositions: 64, initialPositions: 8, dtype: "int8" });
    const f32 = new KvSlots(shape, { maxRows: 4, maxPositions: 64, initialPositions: 8 });
    const width = shape.headDim + 2;
    expect(kv.bytesPerToken).toBe((f32.bytesPerToken / 4 / shape.headDim) * width);
    const { feeds, fetches } = kv.bind(0, 2);
    const past = feeds["past_key_values.0.key"]!;
    expect(past.type).toBe("int8");
    expect(past.dims).toEqual([2, shape.kvHeads, kv.capacity, width]);
    expect((fetches["present.0.key"]!.data as Int8Array).buffer).toBe((past.data as Int8Array).buffer);
    // Every byte of a position, its scale's included, names row, buffer, position and byte.
    const write = (row: number, length: number) =>
      Object.values(kv.bind(0, row + 1).feeds).forEach((t, b) => {
        const data = t.data as Int8Array;
        const span = kv.capacity * width;
        for (let h = 0; h < shape.kvHeads; h++)
          for (let p = 0; p < length; p++)
            for (let d = 0; d < width; d++)
              data[(row * shape.kvHeads + h) * span + p * width + d] = row * 30 + b * 10 + p + d;
      });
    const read = (row: number, length: number) =>
      Object.values(kv.bind(0, row + 1).feeds).flatMap((t) => {
        const data = t.data as Int8Array;
        const span = kv.capacity * width;
        return Array.from({ length: shape.kvHeads }, (_, h) => [
          ...data.subarray(
            (row * shape.kvHeads + h) * span,
            (row * shape.kvHeads + h) * span + length * width,
          ),
        ]).flat();
      });
    write(1, 5);
    expect(read(1, 5)[width + 1]).toBe(30 + 1 + 1);
    expectKeptThroughGrowthBlocksAndMoves(kv, read);
  });
});

describe("KvSlots with the budget reserved up front (the native session's cache)", () => {
  const reserved = (now?: () => number) =>
    new KvSlots(shape, { maxRows: 16, maxPositions: 2048, reserve: true, now });
  /** What the runner does before a pass: room for the rows and positions it writes. */
  const hold = (kv: KvSlots, rows: number, length: number) => {
    kv.ensureRows(rows);
    kv.ensurePositions(length);
  };

  it("binds the whole budget's shape and never re-lays it out, counting only what rows have held", () => {
    const kv = reserved();
    expect(kv.reserved).toBe(true);
    expect(kv.capacity).toBe(2048);
    expect(kv.bytes).toBe(0);
    hold(kv, 2, 5);
    fill(kv, 1, 5);
    const before = positions(kv, 1, 5);
    const memory = kv.bind(0, 2).feeds["past_key_values.0.key"]!.data as Float32Array;
    expect(kv.bind(0, 2).feeds["past_key_values.0.key"]!.dims).toEqual([2, 3, 2048, 4]);
    hold(kv, 16, 1500);
    // Same memory at the same place: growth moved nothing.
    const after = kv.bind(0, 2).feeds["past_key_values.0.key"]!.data as Float32Array;
    expect(after.buffer).toBe(memory.buffer);
    expect(after.byteOffset).toBe(memory.byteOffset);
    expect(positions(kv, 1, 5)).toEqual(before);
    // Committed page by page: each of the 2 x 2 buffers' 16 x 3 (row, head) spans holds 1,500
    // positions of 16 bytes (24,000 bytes), rounded up to whole 4 KiB pages.
    expect(kv.bytes).toBe(4 * 16 * 3 * Math.ceil((1500 * 16) / 4096) * 4096);
    expect(() => kv.ensurePositions(2049)).toThrow(/exceed/);
    expect(() => kv.ensureRows(17)).toThrow(/exceed/);
  });

  it("counts the pages the written extent touches: a position within them adds nothing", () => {
    const kv = reserved();
    hold(kv, 2, 1);
    const onePage = kv.bytes;
    expect(onePage).toBe(4 * 2 * 3 * 4096);
    hold(kv, 2, 256); // 256 positions x 16 bytes = exactly one page
    expect(kv.bytes).toBe(onePage);
    hold(kv, 2, 257);
    expect(kv.bytes).toBe(2 * onePage);
  });

  it("moves the live rows to a fresh reservation once far more was held for a while", () => {
    let now = 0;
    const kv = reserved(() => now);
    hold(kv, 2, 5);
    fill(kv, 0, 5);
    fill(kv, 1, 5);
    const row0 = positions(kv, 0, 5);
    const row1 = positions(kv, 1, 5);
    hold(kv, 16, 1500);
    const old = kv.bind(0, 2).feeds["past_key_values.0.key"]!.data as Float32Array;
    kv.shrinkTo(2, 5);
    now += SHRINK_GRACE_MS;
    kv.shrinkTo(2, 5);
    const fresh = kv.bind(0, 2).feeds["past_key_values.0.key"]!.data as Float32Array;
    expect(fresh.buffer).not.toBe(old.buffer);
    expect(kv.capacity).toBe(2048);
    // Kept: 4 rows (a step of rows) x 64 positions (a step of positions), one page a span.
    expect(kv.bytes).toBe(4 * 4 * 3 * 4096);
    expect(positions(kv, 0, 5)).toEqual(row0);
    expect(positions(kv, 1, 5)).toEqual(row1);
    // Rows past the live ones start empty in the fresh reservation.
    expect(positions(kv, 5, 5).every((x) => x === 0)).toBe(true);
  });

  it("saves, loads and moves rows as a grown cache does", () => {
    const kv = reserved();
    hold(kv, 2, 6);
    fill(kv, 0, 6);
    fill(kv, 1, 6);
    const row0 = positions(kv, 0, 6);
    const row1 = positions(kv, 1, 6);
    kv.loadBlock(kv.saveBlock(0, 0, 6), 3, 0);
    expect(positions(kv, 3, 6)).toEqual(row0);
    kv.moveRows([
      { from: 0, to: 1, length: 6 },
      { from: 1, to: 0, length: 6 },
    ]);
    expect(positions(kv, 0, 6)).toEqual(row1);
    kv.copyRow(0, 2, 6);
    expect(positions(kv, 2, 6)).toEqual(row1);
  });

  it.skipIf(!nativeSessions || process.platform !== "linux")(
    "keeps transparent huge pages off each reservation (the native session's advice, seen in smaps)",
    () => {
      let now = 0;
      const advised: [number, number][] = [];
      const kv = new KvSlots(
        { layers: 30, kvHeads: 3, headDim: 64 },
        {
          maxRows: 4,
          maxPositions: 4096,
          reserve: true,
          dtype: "float16",
          now: () => now,
          onReserve: (memory) => {
            const range = nativeSessions!.keepSmallPages(memory);
            if (range) advised.push(range);
          },
        },
      );
      hold(kv, 4, 2000);
      kv.shrinkTo(1, 10);
      now += SHRINK_GRACE_MS;
      kv.shrinkTo(1, 10);
      // Two reservations (at start and at the shrink), each advised over nearly all its bytes.
      expect(advised).toHaveLength(2);
      const budget = 30 * 2 * 4 * 3 * 4096 * 64 * 2;
      for (const [start, end] of advised) expect(end - start).toBeGreaterThan(budget - 8192);
      // The kernel's view: the mapping that holds the advised range carries the "nh" flag.
      const smaps = readFileSync("/proc/self/smaps", "utf8").split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/);
      const flagsAt = (address: number) => {
        const entry = smaps.find((e) => {
          const [lo, hi] = e
            .slice(0, e.indexOf(" "))
            .split("-")
            .map((h) => Number.parseInt(h, 16));
          return lo! <= address && address < hi!;
        });
        return /VmFlags:(.*)/
          .exec(entry ?? "")?.[1]
          ?.trim()
          .split(" ");
      };
      expect(flagsAt(advised[1]![0])).toContain("nh");
    },
  );

  it("grows on demand instead when the budget cannot be allocated at once", () => {
    const kv = new KvSlots(shape, { maxRows: 1 << 20, maxPositions: 1 << 20, reserve: true });
    expect(kv.reserved).toBe(false);
    expect(kv.capacity).toBeLessThan(1 << 20);
    fill(kv, 1, 5);
    const before = positions(kv, 1, 5);
    kv.ensurePositions(300);
    expect(positions(kv, 1, 5)).toEqual(before);
  });
});

describe("KvSlots with sliding-window layers (rings)", () => {
  // Layer 0 a window of 20 (its ring: ringPositions(20, 64) = 256 positions), layer 1 global.
  const ringShape = { layers: 2, kvHeads: 2, headDim: 4, windows: [20, 0] };
  const make = () =>
    new KvSlots(ringShape, { maxRows: 4, maxPositions: 1024, reserve: true, stepTokens: 64 });
  /** Writes position p of every row/head/buffer as it would be written: the ring's at p % 256. */
  function write(kv: KvSlots, row: number, from: number, to: number): void {
    const { feeds } = kv.bind(0, row + 1);
    Object.values(feeds).forEach((t, b) => {
      const span = t.dims[2]!;
      const data = t.data as Float32Array;
      for (let h = 0; h < 2; h++)
        for (let p = from; p < to; p++)
          for (let d = 0; d < 4; d++)
            data[((row * 2 + h) * span + (p % span)) * 4 + d] = row * 100000 + b * 10000 + p + d / 10;
    });
  }
  /** Position p of a row, every buffer and head, read where the kernel reads it. */
  function read(kv: KvSlots, row: number, p: number): number[] {
    const { feeds } = kv.bind(0, row + 1);
    return Object.values(feeds).flatMap((t) => {
      const span = t.dims[2]!;
      const data = t.data as Float32Array;
      return [0, 1].flatMap((h) => [
        ...data.subarray(
          ((row * 2 + h) * span + (p % span)) * 4,
          ((row * 2 + h) * span + (p % span)) * 4 + 4,
        ),
      ]);
    });
  }

  it("binds a window layer as a ring of 256 positions and a global one whole, and counts their bytes so", () => {
    expect(ringPositions(20, 64)).toBe(256);
    const kv = make();
    const { feeds } = kv.bind(0, 1);
    expect(feeds["past_key_values.0.key"]!.dims).toEqual([1, 2, 256, 4]);
    expect(feeds["past_key_values.1.key"]!.dims).toEqual([1, 2, 1024, 4]);
    expect(kv.retainedPositions).toBe(256);
    kv.reserve(1, 1024);
    // Per row and head: 256 + 1024 positions of 16 bytes, for key and value.
    expect(kv.bytes).toBe(2 * 2 * (256 + 1024) * 16);
    // A cache grown on demand (onnxruntime-node's session) keeps every position: no rings.
    const grown = new KvSlots(ringShape, { maxRows: 4, maxPositions: 1024, stepTokens: 64 });
    expect(grown.retainedPositions).toBe(Number.POSITIVE_INFINITY);
  });

  it("saves a block where the ring holds it, loads it back, and copies and moves whole rings", () => {
    const kv = make();
    write(kv, 0, 0, 700);
    const want = [650, 690, 699].map((p) => read(kv, 0, p));
    // [496, 512) sits at the ring's end, [512, 528) at its start, [506, 522) wraps around it.
    for (const start of [496, 512, 506, 672]) {
      const block = kv.saveBlock(0, start, 16);
      kv.loadBlock(block, 2, start);
      for (let p = start; p < start + 16; p++) expect(read(kv, 2, p)).toEqual(read(kv, 0, p));
    }
    kv.copyRow(0, 1, 700);
    expect([650, 690, 699].map((p) => read(kv, 1, p))).toEqual(want);
    kv.moveRows([{ from: 1, to: 3, length: 700 }]);
    expect([650, 690, 699].map((p) => read(kv, 3, p))).toEqual(want);
    // The global layer kept position 10; the ring's slot 10 now holds position 522.
    expect(read(kv, 3, 10).slice(8)).toEqual(read(kv, 0, 10).slice(8));
  });

  it("refuses to read more positions than a ring holds from anywhere but a row's start", () => {
    const kv = make();
    expect(() => kv.saveBlock(0, 16, 300)).toThrow(/not all in a ring of 256/);
  });
});
