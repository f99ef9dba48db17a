/**
 * GGUF writer: header in memory, tensor data streamed to disk one tensor at a time, each tensor
 * starting on the alignment boundary as llama.cpp expects.
 */
import { closeSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { ByteWriter } from "./byte-writer.ts";
import { ggmlTypeInfo } from "./ggml-types.ts";
import type { GgmlTypeId, GgufMetadataEntry, GgufValue, GgufValueTypeId } from "./types.ts";
import { GgufValueType as V } from "./types.ts";

export interface GgufTensorInput {
  name: string;
  /** ggml order: dims[0] is the fastest-varying. */
  dims: number[];
  type: GgmlTypeId;
  /** Exactly the tensor's encoded bytes, or how to make them when the writer reaches the tensor. */
  data: Uint8Array | LazyTensorBytes;
}

/**
 * Bytes made only when written, so a file larger than memory (a multi-GB synthetic model) holds
 * one tensor at a time; `read` must return exactly `length` bytes.
 */
export interface LazyTensorBytes {
  length: number;
  read(): Uint8Array;
}

function bytesOf(t: GgufTensorInput): Uint8Array {
  if (t.data instanceof Uint8Array) return t.data;
  const bytes = t.data.read();
  if (bytes.length !== t.data.length)
    throw new Error(`tensor ${t.name}: promised ${t.data.length} bytes, made ${bytes.length}`);
  return bytes;
}

export interface GgufWriteOptions {
  version?: 2 | 3;
  /** Data alignment; anything but 32 is recorded as `general.alignment`. */
  alignment?: number;
  metadata: GgufMetadataEntry[];
  tensors: GgufTensorInput[];
}

/** The encoded header (padded to the data section) and where each tensor's bytes start in it. */
export interface GgufLayout {
  header: Buffer;
  alignment: number;
  /** Offset of each tensor relative to the data section, in input order. */
  offsets: number[];
  /** Bytes of the data section including padding between tensors. */
  dataLength: number;
}

const DEFAULT_ALIGNMENT = 32;
const ALIGNMENT_KEY = "general.alignment";
const MAX_DIMS = 4;

/** Writes a GGUF file; it appears at `path` only once complete. */
export function writeGguf(path: string, options: GgufWriteOptions): void {
  const layout = layoutGguf(options);
  // A crash mid-write must not leave something that looks like a finished model.
  const partial = `${path}.partial`;
  const fd = openSync(partial, "w");
  try {
    writeAll(fd, layout.header);
    let written = 0;
    options.tensors.forEach((t, i) => {
      const offset = layout.offsets[i]!;
      if (offset > written) writeAll(fd, new Uint8Array(offset - written));
      writeAll(fd, bytesOf(t));
      written = offset + t.data.length;
    });
    if (layout.dataLength > written) writeAll(fd, new Uint8Array(layout.dataLength - written));
    closeSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(partial, { force: true });
    throw err;
  }
  renameSync(partial, path);
}

/** The whole file in memory; for small files such as test fixtures. */
export function encodeGguf(options: GgufWriteOptions): Buffer {
  const layout = layoutGguf(options);
  const out = Buffer.alloc(layout.header.length + layout.dataLength);
  layout.header.copy(out, 0);
  options.tensors.forEach((t, i) => {
    out.set(bytesOf(t), layout.header.length + layout.offsets[i]!);
  });
  return out;
}

function writeAll(fd: number, data: Uint8Array): void {
  for (let done = 0; done < data.length; ) {
    done += writeSync(fd, data, done, Math.min(data.length - done, 0x40000000));
  }
}

function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

/** Validates the input and encodes everything but the tensor data. */
export function layoutGguf(options: GgufWriteOptions): GgufLayout {
  const version = options.version ?? 3;
  if (version !== 2 && version !== 3) throw new Error(`cannot write GGUF version ${version}`);
  const metadata = withAlignment(options.metadata, options.alignment);
  const alignment = alignmentOf(metadata);

  const w = new ByteWriter();
  w.u8(0x47); // "GGUF"
  w.u8(0x47);
  w.u8(0x55);
  w.u8(0x46);
  w.u32(version);
  w.u64(options.tensors.length);
  w.u64(metadata.length);

  const keys = new Set<string>();
  for (const entry of metadata) {
    if (keys.has(entry.key)) throw new Error(`duplicate metadata key ${entry.key}`);
    keys.add(entry.key);
    w.string(entry.key);
    w.u32(entry.type);
    writeValue(w, entry.type, entry.value, entry, entry.arrayType, entry.nestedTypes ?? []);
  }

  const names = new Set<string>();
  const offsets: number[] = [];
  let dataLength = 0;
  for (const t of options.tensors) {
    if (names.has(t.name)) throw new Error(`duplicate tensor name ${t.name}`);
    names.add(t.name);
    checkTensor(t);
    const offset = alignUp(dataLength, alignment);
    offsets.push(offset);
    dataLength = offset + t.data.length;
    w.string(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(t.type);
    w.u64(offset);
  }
  // The data section and every tensor in it start on the alignment; so does the file's end.
  w.zeros(alignUp(w.length, alignment) - w.length);
  dataLength = alignUp(dataLength, alignment);
  return { header: Buffer.from(w.bytes()), alignment, offsets, dataLength };
}

/** The metadata with `general.alignment` added when the alignment is not the default. */
function withAlignment(metadata: GgufMetadataEntry[], alignment: number | undefined): GgufMetadataEntry[] {
  const existing = metadata.find((e) => e.key === ALIGNMENT_KEY);
  if (alignment === undefined || (existing === undefined && alignment === DEFAULT_ALIGNMENT)) return metadata;
  if (existing !== undefined) {
    if (existing.value !== alignment) {
      throw new Error(`alignment ${alignment} contradicts ${ALIGNMENT_KEY} = ${String(existing.value)}`);
    }
    return metadata;
  }
  return [...metadata, { key: ALIGNMENT_KEY, type: V.UINT32, value: alignment }];
}

function alignmentOf(metadata: GgufMetadataEntry[]): number {
  const entry = metadata.find((e) => e.key === ALIGNMENT_KEY);
  if (entry === undefined) return DEFAULT_ALIGNMENT;
  const a = entry.value;
  if (entry.type !== V.UINT32 || typeof a !== "number" || a <= 0 || a > 0x40000000 || (a & (a - 1)) !== 0) {
    throw new Error(`${ALIGNMENT_KEY} must be a UINT32 power of two, got ${String(a)}`);
  }
  return a;
}

function checkTensor(t: GgufTensorInput): void {
  const info = ggmlTypeInfo(t.type, t.name);
  if (t.dims.length > MAX_DIMS) throw new Error(`tensor ${t.name}: ${t.dims.length} dimensions, at most 4`);
  let count = 1;
  for (const d of t.dims) {
    if (!Number.isSafeInteger(d) || d < 0) throw new Error(`tensor ${t.name}: bad dimension ${d}`);
    count *= d;
  }
  if (!Number.isSafeInteger(count)) throw new Error(`tensor ${t.name}: too many elements`);
  if ((t.dims[0] ?? 1) % info.blockSize !== 0) {
    throw new Error(`tensor ${t.name}: rows of ${t.dims[0]} are not whole ${info.name} blocks`);
  }
  const bytes = (count / info.blockSize) * info.typeSize;
  if (t.data.length !== bytes) {
    throw new Error(
      `tensor ${t.name}: ${info.name} ${t.dims.join("x")} takes ${bytes} bytes, got ${t.data.length}`,
    );
  }
}

const INT_RANGE = new Map<number, [number, number]>([
  [V.UINT8, [0, 0xff]],
  [V.INT8, [-0x80, 0x7f]],
  [V.UINT16, [0, 0xffff]],
  [V.INT16, [-0x8000, 0x7fff]],
  [V.UINT32, [0, 0xffffffff]],
  [V.INT32, [-0x80000000, 0x7fffffff]],
]);

const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;

function writeValue(
  w: ByteWriter,
  type: number,
  value: GgufValue,
  entry: GgufMetadataEntry,
  arrayType: GgufValueTypeId | undefined,
  nested: GgufValueTypeId[],
): void {
  const bad = (): Error =>
    new Error(
      `metadata ${entry.key}: ${JSON.stringify(value, bigintJson)?.slice(0, 80)} is not a valid value of type ${type}`,
    );
  const range = INT_RANGE.get(type);
  if (range !== undefined) {
    if (typeof value !== "number" || !Number.isInteger(value) || value < range[0] || value > range[1])
      throw bad();
  }
  switch (type) {
    case V.UINT8:
      w.u8(value as number);
      break;
    case V.INT8:
      w.i8(value as number);
      break;
    case V.UINT16:
      w.u16(value as number);
      break;
    case V.INT16:
      w.i16(value as number);
      break;
    case V.UINT32:
      w.u32(value as number);
      break;
    case V.INT32:
      w.i32(value as number);
      break;
    case V.FLOAT32:
      if (typeof value !== "number") throw bad();
      w.f32(value);
      break;
    case V.FLOAT64:
      if (typeof value !== "number") throw bad();
      w.f64(value);
      break;
    case V.BOOL:
      if (typeof value !== "boolean") throw bad();
      w.u8(value ? 1 : 0);
      break;
    case V.STRING:
      if (typeof value !== "string") throw bad();
      w.string(value);
      break;
    case V.UINT64:
    case V.INT64: {
      const big =
        typeof value === "bigint" ? value : Number.isSafeInteger(value) ? BigInt(value as number) : null;
      const [lo, hi] = type === V.UINT64 ? [0n, U64_MAX] : [I64_MIN, I64_MAX];
      if (big === null || big < lo || big > hi) throw bad();
      if (type === V.UINT64) w.u64(big);
      else w.i64(big);
      break;
    }
    case V.ARRAY: {
      if (!Array.isArray(value)) throw bad();
      if (arrayType === undefined) {
        throw new Error(`metadata ${entry.key}: an array needs its element type (arrayType / nestedTypes)`);
      }
      w.u32(arrayType);
      w.u64(value.length);
      const inner = nested.slice(1);
      for (const item of value) writeValue(w, arrayType, item, entry, nested[0], inner);
      break;
    }
    default:
      throw new Error(`metadata ${entry.key}: unknown value type ${type}`);
  }
}

function bigintJson(_key: string, v: unknown): unknown {
  return typeof v === "bigint" ? `${v}n` : v;
}

/** A metadata entry for `writeGguf` (the wire type is explicit: JS numbers do not carry one). */
export function metadataEntry(
  key: string,
  type: GgufValueTypeId,
  value: GgufValue,
  arrayType?: GgufValueTypeId,
): GgufMetadataEntry {
  return { key, type, value, arrayType };
}
