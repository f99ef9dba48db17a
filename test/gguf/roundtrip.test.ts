/** writeGguf -> openGguf on real files in a temp dir. */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { dequantize } from "../../src/models/gguf/dequantize.ts";
import { quantize } from "../../src/models/gguf/quantize.ts";
import { openGguf } from "../../src/models/gguf/reader.ts";
import type { GgufMetadataEntry, GgufValue } from "../../src/models/gguf/types.ts";
import { GgmlType as G, GgufValueType as V } from "../../src/models/gguf/types.ts";
import type { GgufTensorInput } from "../../src/models/gguf/writer.ts";
import { encodeGguf, writeGguf } from "../../src/models/gguf/writer.ts";
import { prng, randomBlocks, tempDir } from "./helpers.ts";

const { dir, cleanup } = tempDir();
afterAll(cleanup);

const U64_MAX = 2n ** 64n - 1n;

/** Every value type, with the value the reader should hand back. */
const metadata: [GgufMetadataEntry, GgufValue][] = [
  [{ key: "general.architecture", type: V.STRING, value: "llama" }, "llama"],
  [{ key: "t.u8", type: V.UINT8, value: 255 }, 255],
  [{ key: "t.i8", type: V.INT8, value: -128 }, -128],
  [{ key: "t.u16", type: V.UINT16, value: 65535 }, 65535],
  [{ key: "t.i16", type: V.INT16, value: -32768 }, -32768],
  [{ key: "t.u32", type: V.UINT32, value: 4294967295 }, 4294967295],
  [{ key: "t.i32", type: V.INT32, value: -2147483648 }, -2147483648],
  [{ key: "t.f32", type: V.FLOAT32, value: 0.1 }, Math.fround(0.1)],
  [{ key: "t.f64", type: V.FLOAT64, value: Math.PI }, Math.PI],
  [{ key: "t.true", type: V.BOOL, value: true }, true],
  [{ key: "t.false", type: V.BOOL, value: false }, false],
  [{ key: "t.unicode", type: V.STRING, value: "Grüße 🦙 你好\n\u0000end" }, "Grüße 🦙 你好\n\u0000end"],
  [{ key: "t.empty", type: V.STRING, value: "" }, ""],
  [{ key: "t.u64.max", type: V.UINT64, value: U64_MAX }, U64_MAX],
  [{ key: "t.u64.safe", type: V.UINT64, value: 2 ** 53 - 1 }, 2 ** 53 - 1],
  [{ key: "t.u64.unsafe", type: V.UINT64, value: 2n ** 53n + 1n }, 2n ** 53n + 1n],
  [{ key: "t.u64.small-bigint", type: V.UINT64, value: 7n }, 7],
  [{ key: "t.i64.min", type: V.INT64, value: -(2n ** 63n) }, -(2n ** 63n)],
  [{ key: "t.i64.neg", type: V.INT64, value: -5 }, -5],
  [{ key: "t.i64.safe-min", type: V.INT64, value: -(2 ** 53 - 1) }, -(2 ** 53 - 1)],
  [{ key: "t.arr.empty", type: V.ARRAY, arrayType: V.INT32, value: [] }, []],
  [{ key: "t.arr.f32", type: V.ARRAY, arrayType: V.FLOAT32, value: [1.5, -0.1] }, [1.5, Math.fround(-0.1)]],
  [
    { key: "t.arr.str", type: V.ARRAY, arrayType: V.STRING, value: ["a", "ü", "", "Ġthe"] },
    ["a", "ü", "", "Ġthe"],
  ],
  [{ key: "t.arr.bool", type: V.ARRAY, arrayType: V.BOOL, value: [true, false] }, [true, false]],
  [{ key: "t.arr.u64", type: V.ARRAY, arrayType: V.UINT64, value: [1, U64_MAX] }, [1, U64_MAX]],
  [{ key: "t.arr.i64", type: V.ARRAY, arrayType: V.INT64, value: [-1, -(2n ** 62n)] }, [-1, -(2n ** 62n)]],
  [{ key: "t.arr.i8", type: V.ARRAY, arrayType: V.INT8, value: [-1, 127] }, [-1, 127]],
  [{ key: "t.arr.u16", type: V.ARRAY, arrayType: V.UINT16, value: [0, 65535] }, [0, 65535]],
  [{ key: "t.arr.i16", type: V.ARRAY, arrayType: V.INT16, value: [-2, 3] }, [-2, 3]],
  [{ key: "t.arr.u32", type: V.ARRAY, arrayType: V.UINT32, value: [4294967295] }, [4294967295]],
  [{ key: "t.arr.f64", type: V.ARRAY, arrayType: V.FLOAT64, value: [0.1, 1e300] }, [0.1, 1e300]],
  [{ key: "t.arr.u8", type: V.ARRAY, arrayType: V.UINT8, value: [0, 255] }, [0, 255]],
  [
    {
      key: "t.nested2",
      type: V.ARRAY,
      arrayType: V.ARRAY,
      nestedTypes: [V.STRING],
      value: [["x", "y"], [], ["🦙"]],
    },
    [["x", "y"], [], ["🦙"]],
  ],
  [
    {
      key: "t.nested3",
      type: V.ARRAY,
      arrayType: V.ARRAY,
      nestedTypes: [V.ARRAY, V.INT64],
      value: [[[1n, 2n ** 60n]], [[], [-3]]],
    },
    [[[1, 2n ** 60n]], [[], [-3]]],
  ],
];

function sampleTensors(): GgufTensorInput[] {
  const next = prng(7);
  const values = (n: number) => Float32Array.from({ length: n }, () => next() * 2 - 1);
  return [
    { name: "token_embd.weight", dims: [64, 10], type: G.Q8_0, data: quantize(G.Q8_0, values(640)) },
    { name: "blk.0.attn_q.weight", dims: [64, 3], type: G.Q4_1, data: quantize(G.Q4_1, values(192)) },
    { name: "blk.0.attn_norm.weight", dims: [7], type: G.F32, data: quantize(G.F32, values(7)) },
    { name: "blk.0.ffn_up.weight", dims: [32, 2, 3], type: G.F16, data: quantize(G.F16, values(192)) },
    { name: "blk.0.ffn_down.weight", dims: [256, 2], type: G.Q6_K, data: randomBlocks(210, [208], 2, 3) },
    { name: "pos", dims: [3], type: G.I32, data: new Uint8Array(new Int32Array([1, -2, 3]).buffer) },
    { name: "empty", dims: [0, 4], type: G.F32, data: new Uint8Array(0) },
  ];
}

describe.each([32, 64, 1, 4096])("alignment %i", (alignment) => {
  const path = join(dir, `model-${alignment}.gguf`);
  const tensors = sampleTensors();
  const options = { alignment, metadata: metadata.map(([e]) => e), tensors };
  writeGguf(path, options);
  const file = openGguf(path);
  afterAll(() => file.close());

  it("reads back every metadata value and type", () => {
    for (const [entry, expected] of metadata)
      expect([entry.key, file.metadata.get(entry.key)]).toEqual([entry.key, expected]);
    const stored = file.metadataEntries.filter((e) => e.key !== "general.alignment");
    expect(stored.map((e) => [e.key, e.type, e.arrayType, e.nestedTypes])).toEqual(
      metadata.map(([e]) => [e.key, e.type, e.arrayType, e.nestedTypes]),
    );
    expect(file.metadata.get("general.alignment")).toBe(alignment === 32 ? undefined : alignment);
  });

  it("places tensors on the alignment and reads their exact bytes", () => {
    expect(file.version).toBe(3);
    expect(file.alignment).toBe(alignment);
    expect(file.dataOffset % alignment).toBe(0);
    expect(file.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
    tensors.forEach((input, i) => {
      const info = file.tensors[i]!;
      expect(file.tensor(input.name)).toBe(info);
      expect(info.dims).toEqual(input.dims);
      expect(info.type).toBe(input.type);
      expect(info.fileOffset % alignment).toBe(0);
      expect(info.byteLength).toBe(input.data.length);
      expect(info.elementCount).toBe(input.dims.reduce((a, b) => a * b, 1));
      const data = input.data as Uint8Array;
      expect(Buffer.compare(file.readTensorBytes(info), Buffer.from(data))).toBe(0);
      expect(file.dequantize(info)).toEqual(dequantize(input.type, data, info.elementCount));
    });
    expect(file.tensor("missing")).toBeUndefined();
    expect(statSync(path).size % alignment).toBe(0);
  });

  it("matches encodeGguf byte for byte and rewrites identically from what it read", () => {
    const bytes = readFileSync(path);
    expect(Buffer.compare(encodeGguf(options), bytes)).toBe(0);
    const again = encodeGguf({
      alignment,
      metadata: file.metadataEntries,
      tensors: file.tensors.map((t) => ({
        name: t.name,
        dims: t.dims,
        type: t.type,
        data: file.readTensorBytes(t),
      })),
    });
    expect(Buffer.compare(again, bytes)).toBe(0);
  });
});

describe("writer", () => {
  it("writes version 2 on request, which the reader accepts", () => {
    const path = join(dir, "v2.gguf");
    writeGguf(path, {
      version: 2,
      metadata: [{ key: "k", type: V.UINT32, value: 1 }],
      tensors: sampleTensors(),
    });
    const file = openGguf(path);
    expect(file.version).toBe(2);
    expect(file.metadata.get("k")).toBe(1);
    file.close();
    expect(() => file.readTensorBytes(file.tensors[0]!)).toThrow(/closed/);
  });

  it("leaves no partial file behind and refuses bad input", () => {
    expect(readdirSync(dir).filter((n) => n.endsWith(".partial"))).toEqual([]);
    const bad =
      (m: GgufMetadataEntry[], t: GgufTensorInput[] = []) =>
      () =>
        writeGguf(join(dir, "bad.gguf"), { metadata: m, tensors: t });
    expect(bad([{ key: "x", type: V.UINT8, value: 256 }])).toThrow(/x: 256 is not a valid value of type 0/);
    expect(bad([{ key: "x", type: V.INT64, value: 2 ** 60 }])).toThrow(/not a valid value/);
    expect(bad([{ key: "x", type: V.UINT64, value: -1n }])).toThrow(/not a valid value/);
    expect(bad([{ key: "x", type: V.ARRAY, value: [1] }])).toThrow(/needs its element type/);
    expect(bad([{ key: "x", type: V.ARRAY, arrayType: V.ARRAY, value: [[1]] }])).toThrow(
      /needs its element type/,
    );
    expect(bad([{ key: "x", type: V.STRING, value: 3 }])).toThrow(/not a valid value of type 8/);
    expect(
      bad(
        [
          { key: "x", type: V.BOOL, value: true },
          { key: "x", type: V.BOOL, value: true },
        ],
        [],
      ),
    ).toThrow(/duplicate metadata key x/);
    const q: GgufTensorInput = { name: "w", dims: [16], type: G.Q8_0, data: new Uint8Array(17) };
    expect(bad([], [q])).toThrow(/rows of 16 are not whole Q8_0 blocks/);
    expect(bad([], [{ ...q, dims: [32] }])).toThrow(/takes 34 bytes, got 17/);
    expect(bad([], [{ ...q, type: 16 as never }])).toThrow(
      /unsupported ggml tensor type 16 \(IQ2_XXS\) in tensor w/,
    );
    expect(() =>
      writeGguf(join(dir, "bad.gguf"), {
        alignment: 48,
        metadata: [],
        tensors: [],
      }),
    ).toThrow(/power of two/);
    expect(existsSync(join(dir, "bad.gguf"))).toBe(false);
  });

  it("makes lazy tensor bytes only when it writes them, and checks their length", () => {
    const values = Float32Array.from({ length: 64 }, (_, i) => i / 8 - 4);
    const made: string[] = [];
    const lazy = (name: string, bytes: Uint8Array, length = bytes.length): GgufTensorInput => ({
      name,
      dims: [64],
      type: G.F32,
      data: {
        length,
        read: () => {
          made.push(name);
          return bytes;
        },
      },
    });
    const f32 = new Uint8Array(values.buffer);
    const path = join(dir, "lazy.gguf");
    writeGguf(path, { metadata: [], tensors: [lazy("a", f32), lazy("b", f32.slice().reverse())] });
    expect(made).toEqual(["a", "b"]);
    const g = openGguf(path);
    expect(g.dequantize(g.tensor("a")!)).toEqual(values);
    expect(Buffer.from(g.readTensorBytes(g.tensor("b")!))).toEqual(Buffer.from(f32.slice().reverse()));
    g.close();
    const short = lazy("c", f32.subarray(0, 128), 256);
    expect(() => writeGguf(join(dir, "short.gguf"), { metadata: [], tensors: [short] })).toThrow(
      /tensor c: promised 256 bytes, made 128/,
    );
    expect(existsSync(join(dir, "short.gguf"))).toBe(false);
  });
});
