/**
 * GGUF reader (ggml docs/gguf.md, versions 2 and 3): parses the header with buffered positioned
 * reads and keeps the descriptor open so tensors are read one at a time, never the whole file.
 */
import { closeSync, fstatSync, openSync } from "node:fs";
import { dequantize } from "./dequantize.ts";
import { GgufFormatError } from "./errors.ts";
import { FileCursor, join64, readFully } from "./file-cursor.ts";
import { ggmlTypeInfo } from "./ggml-types.ts";
import type { GgmlTypeId, GgufMetadataEntry, GgufTensorInfo, GgufValue, GgufValueTypeId } from "./types.ts";
import { GgufValueType as V } from "./types.ts";

export { GgufFormatError } from "./errors.ts";

export interface GgufFile {
  path: string;
  version: number;
  alignment: number;
  /** Absolute offset of the tensor data section (tensor offsets are relative to it). */
  dataOffset: number;
  fileSize: number;
  metadata: Map<string, GgufValue>;
  /** The metadata again, in file order and with the wire types (enough to write it back). */
  metadataEntries: GgufMetadataEntry[];
  /** In file order. */
  tensors: GgufTensorInfo[];
  tensor(name: string): GgufTensorInfo | undefined;
  /** Exactly that tensor's bytes, read at its offset. */
  readTensorBytes(info: GgufTensorInfo): Buffer;
  /** The tensor as float32 in ggml order (dims[0] fastest). */
  dequantize(info: GgufTensorInfo): Float32Array;
  close(): void;
}

const MAGIC = "GGUF";
const DEFAULT_ALIGNMENT = 32;
/** GGML_MAX_DIMS. */
const MAX_DIMS = 4;
/** Deeper nesting than this is corruption, not data; the bound keeps recursion shallow. */
const MAX_ARRAY_DEPTH = 16;
/** Smallest tensor info: name length, n_dims, type, offset. */
const MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8;
/** Smallest metadata entry: key length, value type, a one-byte value. */
const MIN_ENTRY_BYTES = 8 + 4 + 1;

/** Encoded size of each fixed-size value type. */
const SCALAR_SIZE = new Map<number, number>([
  [V.UINT8, 1],
  [V.INT8, 1],
  [V.UINT16, 2],
  [V.INT16, 2],
  [V.UINT32, 4],
  [V.INT32, 4],
  [V.FLOAT32, 4],
  [V.BOOL, 1],
  [V.UINT64, 8],
  [V.INT64, 8],
  [V.FLOAT64, 8],
]);

/** Bytes the smallest value of a type takes, for bounding element counts. */
function minValueSize(type: number): number {
  if (type === V.STRING) return 8;
  if (type === V.ARRAY) return 4 + 8;
  return SCALAR_SIZE.get(type)!;
}

function isValueType(type: number): type is GgufValueTypeId {
  return SCALAR_SIZE.has(type) || type === V.STRING || type === V.ARRAY;
}

export function openGguf(path: string): GgufFile {
  const fd = openSync(path, "r");
  try {
    return parse(new FileCursor(fd, path, fstatSync(fd).size));
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/**
 * Only the header's metadata (architecture, tokenizer, chat template): enough for a file whose
 * tensor data is missing, such as the first part of a split download.
 */
export function readGgufMetadata(path: string): Map<string, GgufValue> {
  const fd = openSync(path, "r");
  try {
    return parseMetadata(new FileCursor(fd, path, fstatSync(fd).size)).metadata;
  } finally {
    closeSync(fd);
  }
}

function parseMetadata(c: FileCursor) {
  const magic = c.bytes(4, "magic");
  if (magic.toString("latin1") !== MAGIC) {
    throw new GgufFormatError(
      `not a GGUF file ${c.path}: magic at offset 0 is ${JSON.stringify(magic.toString("latin1"))}, expected "GGUF"`,
    );
  }
  const version = readVersion(c);
  const tensorCount = c.count("tensor count", MIN_TENSOR_INFO_BYTES);
  const entryCount = c.count("metadata count", MIN_ENTRY_BYTES);

  const metadata = new Map<string, GgufValue>();
  const metadataEntries: GgufMetadataEntry[] = [];
  for (let i = 0; i < entryCount; i++) {
    const keyAt = c.pos;
    const key = c.string(`metadata key #${i}`);
    if (metadata.has(key)) throw c.fail(`duplicate metadata key ${JSON.stringify(key)}`, keyAt);
    const entry = readEntry(c, key);
    metadata.set(key, entry.value);
    metadataEntries.push(entry);
  }
  return { version, tensorCount, metadata, metadataEntries };
}

function parse(c: FileCursor): GgufFile {
  const { version, tensorCount, metadata, metadataEntries } = parseMetadata(c);
  const alignment = readAlignment(c, metadataEntries);

  const infos: RawTensorInfo[] = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const at = c.pos;
    const info = readTensorInfo(c, i, alignment);
    if (names.has(info.name)) throw c.fail(`duplicate tensor name ${JSON.stringify(info.name)}`, at);
    names.add(info.name);
    infos.push(info);
  }

  const dataOffset = alignUp(c.pos, alignment);
  const tensors = infos.map(({ name, dims, type, offset }): GgufTensorInfo => {
    const { blockSize, typeSize } = ggmlTypeInfo(type);
    const elementCount = dims.reduce((a, b) => a * b, 1);
    const byteLength = (elementCount / blockSize) * typeSize;
    const fileOffset = dataOffset + offset;
    if (fileOffset + byteLength > c.size) {
      throw new GgufFormatError(
        `truncated GGUF file ${c.path}: tensor ${name} needs bytes ${fileOffset}..${fileOffset + byteLength}, file has ${c.size}`,
      );
    }
    return { name, dims, type, fileOffset, byteLength, elementCount };
  });

  return new OpenGgufFile(c, version, alignment, dataOffset, metadata, metadataEntries, tensors);
}

function readVersion(c: FileCursor): number {
  const at = c.pos;
  const version = c.u32("version");
  if (version === 2 || version === 3) return version;
  if (version === 1) {
    throw c.fail("GGUF version 1 is not supported (re-convert the model with a current llama.cpp)", at);
  }
  // A big-endian file has its small version number in the high bytes.
  const hint = version > 0xffff ? " (the file looks big-endian, which is not supported)" : "";
  throw c.fail(`unsupported GGUF version ${version}${hint}`, at);
}

function readEntry(c: FileCursor, key: string): GgufMetadataEntry {
  const typeAt = c.pos;
  const type = c.u32(`value type of ${key}`);
  if (!isValueType(type)) throw c.fail(`unknown value type ${type} for metadata key ${key}`, typeAt);
  if (type !== V.ARRAY) return { key, type, value: readScalar(c, type, `value of ${key}`) };
  const levels: GgufValueTypeId[] = [];
  const value = readArray(c, key, 0, levels);
  const entry: GgufMetadataEntry = { key, type, arrayType: levels[0]!, value };
  if (levels.length > 1) entry.nestedTypes = levels.slice(1);
  return entry;
}

function readScalar(c: FileCursor, type: number, what: string): GgufValue {
  switch (type) {
    case V.UINT8:
      return c.u8(what);
    case V.INT8:
      return c.i8(what);
    case V.UINT16:
      return c.u16(what);
    case V.INT16:
      return c.i16(what);
    case V.UINT32:
      return c.u32(what);
    case V.INT32:
      return c.i32(what);
    case V.FLOAT32:
      return c.f32(what);
    case V.BOOL:
      // llama.cpp reads bools as int8 and treats any non-zero byte as true.
      return c.u8(what) !== 0;
    case V.STRING:
      return c.string(what);
    case V.UINT64:
      return c.u64(what);
    case V.INT64:
      return c.i64(what);
    case V.FLOAT64:
      return c.f64(what);
    default:
      throw c.fail(`unexpected value type ${type} for ${what}`);
  }
}

/** An array value; `levels[d]` records the element type seen at nesting depth d. */
function readArray(c: FileCursor, key: string, depth: number, levels: GgufValueTypeId[]): GgufValue[] {
  if (depth >= MAX_ARRAY_DEPTH) throw c.fail(`arrays nested more than ${MAX_ARRAY_DEPTH} deep in ${key}`);
  const typeAt = c.pos;
  const type = c.u32(`array element type of ${key}`);
  if (!isValueType(type)) throw c.fail(`unknown array element type ${type} in metadata key ${key}`, typeAt);
  if (levels.length === depth) levels.push(type);
  const n = c.count(`array length of ${key}`, minValueSize(type));
  const what = `elements of ${key}`;
  const out: GgufValue[] = new Array(n);
  if (type === V.STRING) {
    for (let i = 0; i < n; i++) out[i] = c.string(what);
  } else if (type === V.ARRAY) {
    for (let i = 0; i < n; i++) out[i] = readArray(c, key, depth + 1, levels);
  } else {
    decodeScalars(c.bytes(n * SCALAR_SIZE.get(type)!, what), type, out);
  }
  return out;
}

/** Fixed-size elements straight from one block of bytes: big vocab arrays cost one bounds check. */
function decodeScalars(b: Buffer, type: number, out: GgufValue[]): void {
  const n = out.length;
  switch (type) {
    case V.UINT8:
      for (let i = 0; i < n; i++) out[i] = b[i]!;
      return;
    case V.INT8:
      for (let i = 0; i < n; i++) out[i] = b.readInt8(i);
      return;
    case V.BOOL:
      for (let i = 0; i < n; i++) out[i] = b[i] !== 0;
      return;
    case V.UINT16:
      for (let i = 0; i < n; i++) out[i] = b.readUInt16LE(2 * i);
      return;
    case V.INT16:
      for (let i = 0; i < n; i++) out[i] = b.readInt16LE(2 * i);
      return;
    case V.UINT32:
      for (let i = 0; i < n; i++) out[i] = b.readUInt32LE(4 * i);
      return;
    case V.INT32:
      for (let i = 0; i < n; i++) out[i] = b.readInt32LE(4 * i);
      return;
    case V.FLOAT32:
      for (let i = 0; i < n; i++) out[i] = b.readFloatLE(4 * i);
      return;
    case V.FLOAT64:
      for (let i = 0; i < n; i++) out[i] = b.readDoubleLE(8 * i);
      return;
    case V.UINT64:
    case V.INT64: {
      const signed = type === V.INT64;
      for (let i = 0; i < n; i++) {
        const lo = b.readUInt32LE(8 * i);
        const hi = signed ? b.readInt32LE(8 * i + 4) : b.readUInt32LE(8 * i + 4);
        out[i] = join64(lo, hi, signed);
      }
      return;
    }
  }
}

function readAlignment(c: FileCursor, entries: GgufMetadataEntry[]): number {
  const entry = entries.find((e) => e.key === "general.alignment");
  if (entry === undefined) return DEFAULT_ALIGNMENT;
  const a = entry.value;
  if (typeof a !== "number" || !Number.isInteger(a) || a <= 0 || a > 0x40000000 || (a & (a - 1)) !== 0) {
    throw new GgufFormatError(
      `invalid GGUF file ${c.path}: general.alignment ${String(a)} is not a power of two`,
    );
  }
  return a;
}

/** A tensor info as stored: `offset` is relative to the data section. */
interface RawTensorInfo {
  name: string;
  dims: number[];
  type: GgmlTypeId;
  offset: number;
}

function readTensorInfo(c: FileCursor, index: number, alignment: number): RawTensorInfo {
  const name = c.string(`name of tensor #${index}`);
  const dimsAt = c.pos;
  const nDims = c.u32(`dimension count of tensor ${name}`);
  if (nDims > MAX_DIMS) throw c.fail(`tensor ${name} has ${nDims} dimensions, at most ${MAX_DIMS}`, dimsAt);
  const dims: number[] = [];
  let elements = 1;
  for (let d = 0; d < nDims; d++) {
    const dimAt = c.pos;
    const v = c.u64(`dimension ${d} of tensor ${name}`);
    elements *= typeof v === "number" ? v : Number.POSITIVE_INFINITY;
    if (!Number.isSafeInteger(elements)) {
      throw c.fail(`tensor ${name} has an impossible element count (dimension ${d} is ${v})`, dimAt);
    }
    dims.push(v as number);
  }
  const typeAt = c.pos;
  const typeId = c.u32(`type of tensor ${name}`);
  let type: GgmlTypeId;
  let blockSize: number;
  try {
    ({ id: type, blockSize } = ggmlTypeInfo(typeId, name));
  } catch (err) {
    throw c.fail((err as Error).message, typeAt);
  }
  // ggml needs whole blocks per row (dims[0]), which also makes the total a whole number of blocks.
  if ((dims[0] ?? 1) % blockSize !== 0) {
    throw c.fail(
      `tensor ${name} has rows of ${dims[0] ?? 1} elements, not a multiple of the ${blockSize}-element block`,
      dimsAt,
    );
  }
  const offsetAt = c.pos;
  const offset = c.u64(`data offset of tensor ${name}`);
  if (typeof offset !== "number" || offset > c.size) {
    throw c.fail(`data offset ${offset} of tensor ${name} is past the end of the file`, offsetAt);
  }
  if (offset % alignment !== 0) {
    throw c.fail(
      `data offset ${offset} of tensor ${name} is not a multiple of the alignment ${alignment}`,
      offsetAt,
    );
  }
  return { name, dims, type, offset };
}

function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

class OpenGgufFile implements GgufFile {
  readonly path: string;
  readonly version: number;
  readonly alignment: number;
  readonly dataOffset: number;
  readonly fileSize: number;
  readonly metadata: Map<string, GgufValue>;
  readonly metadataEntries: GgufMetadataEntry[];
  readonly tensors: GgufTensorInfo[];
  private fd: number | undefined;
  private readonly byName: Map<string, GgufTensorInfo>;

  constructor(
    c: FileCursor,
    version: number,
    alignment: number,
    dataOffset: number,
    metadata: Map<string, GgufValue>,
    metadataEntries: GgufMetadataEntry[],
    tensors: GgufTensorInfo[],
  ) {
    this.path = c.path;
    this.fd = c.fd;
    this.fileSize = c.size;
    this.version = version;
    this.alignment = alignment;
    this.dataOffset = dataOffset;
    this.metadata = metadata;
    this.metadataEntries = metadataEntries;
    this.tensors = tensors;
    this.byName = new Map(tensors.map((t) => [t.name, t]));
  }

  tensor(name: string): GgufTensorInfo | undefined {
    return this.byName.get(name);
  }

  readTensorBytes(info: GgufTensorInfo): Buffer {
    if (this.fd === undefined) throw new Error(`GGUF file ${this.path} is closed`);
    if (info.fileOffset < this.dataOffset || info.fileOffset + info.byteLength > this.fileSize) {
      throw new RangeError(`tensor ${info.name} lies outside the data of ${this.path}`);
    }
    const out = Buffer.allocUnsafe(info.byteLength);
    readFully(this.fd, out, 0, info.byteLength, info.fileOffset);
    return out;
  }

  dequantize(info: GgufTensorInfo): Float32Array {
    return dequantize(info.type, this.readTensorBytes(info), info.elementCount);
  }

  close(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}
