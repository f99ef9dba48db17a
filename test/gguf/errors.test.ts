/** Corrupt files: each must fail with a GgufFormatError naming the file, the field and the offset. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GgufFormatError, openGguf, readGgufMetadata } from "../../src/models/gguf/reader.ts";
import type { GgufMetadataEntry } from "../../src/models/gguf/types.ts";
import { GgmlType as G, GgufValueType as V } from "../../src/models/gguf/types.ts";
import { encodeGguf } from "../../src/models/gguf/writer.ts";
import { tempDir } from "./helpers.ts";

const { dir, cleanup } = tempDir();
afterAll(cleanup);

/*
 * Without metadata, one F32 tensor "w" of 8 elements lays out as:
 *   0 magic, 4 version, 8 tensor count, 16 metadata count,
 *   24 name length, 32 "w", 33 n_dims, 37 dims[0], 45 type, 49 offset, 57..64 padding, 64 data (32 B).
 */
function oneTensor(): Buffer {
  return encodeGguf({
    metadata: [],
    tensors: [{ name: "w", dims: [8], type: G.F32, data: new Uint8Array(32) }],
  });
}

/** Metadata only; the first key's length field sits at offset 24. */
function withMetadata(entries: GgufMetadataEntry[]): Buffer {
  return encodeGguf({ metadata: entries, tensors: [] });
}

let counter = 0;
function openBytes(bytes: Uint8Array): () => unknown {
  const path = join(dir, `case-${counter++}.gguf`);
  writeFileSync(path, bytes);
  return () => openGguf(path);
}

/** The error thrown by `fn`, checked to be a GgufFormatError that names the file. */
function failure(bytes: Uint8Array): GgufFormatError {
  const path = join(dir, `case-${counter}.gguf`);
  const open = openBytes(bytes);
  try {
    open();
  } catch (err) {
    expect(err).toBeInstanceOf(GgufFormatError);
    expect((err as Error).message).toContain(path);
    return err as GgufFormatError;
  }
  throw new Error("expected openGguf to fail");
}

function patched(bytes: Buffer, edit: (b: Buffer) => void): Buffer {
  const copy = Buffer.from(bytes);
  edit(copy);
  return copy;
}

describe("openGguf rejects", () => {
  it("a well-formed file is accepted (the baseline for the corruptions below)", () => {
    const file = openBytes(oneTensor())() as { tensors: { fileOffset: number }[]; close(): void };
    expect(file.tensors[0]!.fileOffset).toBe(64);
    file.close();
  });

  it("bad magic", () => {
    const err = failure(patched(oneTensor(), (b) => b.write("GGML", 0, "latin1")));
    expect(err.message).toMatch(/^not a GGUF file .*: magic at offset 0 is "GGML", expected "GGUF"$/);
  });

  it("version 1, unknown versions and big-endian files", () => {
    expect(failure(patched(oneTensor(), (b) => b.writeUInt32LE(1, 4))).message).toMatch(
      /GGUF version 1 is not supported .* at offset 4$/,
    );
    expect(failure(patched(oneTensor(), (b) => b.writeUInt32LE(4, 4))).message).toMatch(
      /unsupported GGUF version 4/,
    );
    expect(failure(patched(oneTensor(), (b) => b.writeUInt32BE(3, 4))).message).toMatch(/big-endian/);
  });

  it("a truncated header", () => {
    const bytes = oneTensor().subarray(0, 12);
    const path = join(dir, `case-${counter}.gguf`);
    expect(failure(bytes).message).toBe(
      `truncated GGUF file ${path}: expected 8 bytes for tensor count at offset 8, file has 12`,
    );
    // Key length at 24, "k" at 32, value type at 33, the u32 value at 37.
    const kv = withMetadata([{ key: "k", type: V.UINT32, value: 7 }]);
    expect(failure(kv.subarray(0, 39)).message).toMatch(
      /expected 4 bytes for value of k at offset 37, file has 39$/,
    );
    expect(failure(new Uint8Array(2)).message).toMatch(/expected 4 bytes for magic at offset 0, file has 2$/);
  });

  it("truncated tensor data", () => {
    expect(failure(oneTensor().subarray(0, 90)).message).toMatch(
      /^truncated GGUF file .*: tensor w needs bytes 64\.\.96, file has 90$/,
    );
  });

  it("truncated tensor data still gives its header's metadata (the first part of a split file)", () => {
    const path = join(dir, "first-part.gguf");
    const whole = encodeGguf({
      metadata: [{ key: "general.architecture", type: V.STRING, value: "qwen2" }],
      tensors: [{ name: "w", dims: [8], type: G.F32, data: new Uint8Array(32) }],
    });
    writeFileSync(path, whole.subarray(0, whole.length - 10));
    expect(() => openGguf(path)).toThrow(/truncated GGUF file/);
    expect(readGgufMetadata(path).get("general.architecture")).toBe("qwen2");
  });

  it("unknown and unsupported tensor types", () => {
    expect(failure(patched(oneTensor(), (b) => b.writeUInt32LE(16, 45))).message).toMatch(
      /unsupported ggml tensor type 16 \(IQ2_XXS\) in tensor w at offset 45$/,
    );
    expect(failure(patched(oneTensor(), (b) => b.writeUInt32LE(200, 45))).message).toMatch(
      /unknown ggml tensor type 200 in tensor w at offset 45$/,
    );
  });

  it("an absurd string length instead of allocating it", () => {
    const bytes = withMetadata([{ key: "general.name", type: V.STRING, value: "x" }]);
    const err = failure(patched(bytes, (b) => b.writeBigUInt64LE(2n ** 60n, 24)));
    expect(err.message).toMatch(
      /length of metadata key #0 1152921504606846976 \(bytes\) exceeds the \d+ bytes left in the file at offset 24$/,
    );
    // The value string: key length 8 + "general.name" 12 + type 4 puts its length at 48.
    const err2 = failure(patched(bytes, (b) => b.writeBigUInt64LE(2n ** 64n - 1n, 48)));
    expect(err2.message).toMatch(/length of value of general.name 18446744073709551615 \(bytes\) exceeds/);
  });

  it("absurd array and tensor counts", () => {
    const bytes = withMetadata([{ key: "a", type: V.ARRAY, arrayType: V.UINT32, value: [1, 2] }]);
    // key length 8 + "a" 1 + type 4 + element type 4 puts the array length at 24 + 17 = 41.
    expect(failure(patched(bytes, (b) => b.writeBigUInt64LE(2n ** 40n, 41))).message).toMatch(
      /array length of a 1099511627776 \(entries of at least 4 bytes\) exceeds the \d+ bytes left in the file at offset 41$/,
    );
    expect(failure(patched(oneTensor(), (b) => b.writeBigUInt64LE(2n ** 33n, 8))).message).toMatch(
      /tensor count 8589934592 .* at offset 8$/,
    );
  });

  it("a misaligned tensor offset", () => {
    expect(failure(patched(oneTensor(), (b) => b.writeBigUInt64LE(8n, 49))).message).toMatch(
      /data offset 8 of tensor w is not a multiple of the alignment 32 at offset 49$/,
    );
  });

  it("bad dimensions and partial blocks", () => {
    expect(failure(patched(oneTensor(), (b) => b.writeUInt32LE(5, 33))).message).toMatch(
      /tensor w has 5 dimensions, at most 4 at offset 33$/,
    );
    expect(failure(patched(oneTensor(), (b) => b.writeBigUInt64LE(2n ** 62n, 37))).message).toMatch(
      /impossible element count/,
    );
    expect(failure(patched(oneTensor(), (b) => b.writeUInt32LE(G.Q8_0, 45))).message).toMatch(
      /tensor w has rows of 8 elements, not a multiple of the 32-element block/,
    );
  });

  it("a bad alignment, unknown value types and duplicate keys", () => {
    const aligned = withMetadata([{ key: "general.alignment", type: V.UINT32, value: 64 }]);
    // key length 8 + "general.alignment" 17 + type 4: the value is at 53.
    expect(failure(patched(aligned, (b) => b.writeUInt32LE(48, 53))).message).toMatch(
      /general.alignment 48 is not a power of two/,
    );
    expect(failure(patched(aligned, (b) => b.writeUInt32LE(13, 49))).message).toMatch(
      /unknown value type 13 for metadata key general.alignment at offset 49$/,
    );
    const two = withMetadata([
      { key: "a", type: V.UINT8, value: 1 },
      { key: "b", type: V.UINT8, value: 2 },
    ]);
    // Second key: 24 + 8 + 1 + 4 + 1 = 38 is its length, its byte at 46.
    expect(failure(patched(two, (b) => b.write("a", 46))).message).toMatch(
      /duplicate metadata key "a" at offset 38$/,
    );
  });

  it("a missing file with the ordinary ENOENT error", () => {
    expect(() => openGguf(join(dir, "nope.gguf"))).toThrow(/ENOENT/);
  });
});
