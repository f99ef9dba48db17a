/**
 * Sequential little-endian reads over a file descriptor through one reusable buffer, so parsing a
 * header with ~100k small strings costs a handful of positioned reads instead of one per field,
 * and never reads the tensor data behind it.
 */
import { readSync } from "node:fs";
import { GgufFormatError } from "./errors.ts";

const TWO_32 = 2 ** 32;

/** Reads exactly `length` bytes at `position` (readSync may return short counts). */
export function readFully(
  fd: number,
  into: Uint8Array,
  offset: number,
  length: number,
  position: number,
): void {
  let done = 0;
  while (done < length) {
    // readSync takes at most 2^31-1 bytes per call.
    const chunk = Math.min(length - done, 0x40000000);
    const n = readSync(fd, into, offset + done, chunk, position + done);
    if (n === 0) throw new Error(`unexpected end of file at offset ${position + done}`);
    done += n;
  }
}

/** `hi * 2^32 + lo` as a number when it is a safe integer, else as a bigint. */
export function join64(lo: number, hi: number, signed: boolean): number | bigint {
  // |hi| < 2^21 keeps the sum exact, after which the safe-integer test is reliable.
  if (hi < 0x200000 && hi >= -0x200000) {
    const v = hi * TWO_32 + lo;
    if (Number.isSafeInteger(v)) return v;
  }
  const big = (BigInt(hi >>> 0) << 32n) | BigInt(lo);
  return signed ? BigInt.asIntN(64, big) : big;
}

export class FileCursor {
  readonly fd: number;
  readonly path: string;
  readonly size: number;
  /** Absolute file offset of the next read. */
  pos = 0;
  private buf: Buffer;
  private bufStart = 0;
  private bufEnd = 0;

  constructor(fd: number, path: string, size: number, bufferSize = 1 << 20) {
    this.fd = fd;
    this.path = path;
    this.size = size;
    this.buf = Buffer.allocUnsafe(bufferSize);
  }

  /** An error about the field `what` at `offset` (default: the current position). */
  fail(detail: string, offset: number = this.pos): GgufFormatError {
    return new GgufFormatError(`invalid GGUF file ${this.path}: ${detail} at offset ${offset}`);
  }

  /** Makes [pos, pos+n) resident and returns its index in the buffer; advances pos. */
  private take(n: number, what: string): number {
    const start = this.pos;
    if (start + n > this.size) {
      throw new GgufFormatError(
        `truncated GGUF file ${this.path}: expected ${n} bytes for ${what} at offset ${start}, file has ${this.size}`,
      );
    }
    if (start < this.bufStart || start + n > this.bufEnd) {
      // n is bounded by the file size (checked above), so growing cannot run away.
      if (n > this.buf.length) this.buf = Buffer.allocUnsafe(Math.max(n, this.buf.length * 2));
      const len = Math.min(this.buf.length, this.size - start);
      readFully(this.fd, this.buf, 0, len, start);
      this.bufStart = start;
      this.bufEnd = start + len;
    }
    this.pos = start + n;
    return start - this.bufStart;
  }

  u8(what: string): number {
    return this.buf[this.take(1, what)]!;
  }

  i8(what: string): number {
    return this.buf.readInt8(this.take(1, what));
  }

  u16(what: string): number {
    return this.buf.readUInt16LE(this.take(2, what));
  }

  i16(what: string): number {
    return this.buf.readInt16LE(this.take(2, what));
  }

  u32(what: string): number {
    return this.buf.readUInt32LE(this.take(4, what));
  }

  i32(what: string): number {
    return this.buf.readInt32LE(this.take(4, what));
  }

  f32(what: string): number {
    return this.buf.readFloatLE(this.take(4, what));
  }

  f64(what: string): number {
    return this.buf.readDoubleLE(this.take(8, what));
  }

  u64(what: string): number | bigint {
    const i = this.take(8, what);
    return join64(this.buf.readUInt32LE(i), this.buf.readUInt32LE(i + 4), false);
  }

  i64(what: string): number | bigint {
    const i = this.take(8, what);
    return join64(this.buf.readUInt32LE(i), this.buf.readInt32LE(i + 4), true);
  }

  /**
   * A u64 count of items each at least `unitSize` bytes long that must still fit in the file: a
   * corrupt length becomes an error here instead of a huge allocation later.
   */
  count(what: string, unitSize: number): number {
    const at = this.pos;
    const v = this.u64(what);
    const left = this.size - this.pos;
    if (typeof v === "bigint" || v * unitSize > left) {
      const unit = unitSize === 1 ? "bytes" : `entries of at least ${unitSize} bytes`;
      throw this.fail(`${what} ${v} (${unit}) exceeds the ${left} bytes left in the file`, at);
    }
    return v;
  }

  /** The next n bytes; a view into the shared buffer that is only valid until the next read. */
  bytes(n: number, what: string): Buffer {
    const i = this.take(n, what);
    return this.buf.subarray(i, i + n);
  }

  /** A GGUF string: u64 byte length, then UTF-8 without terminator. */
  string(what: string): string {
    const n = this.count(`length of ${what}`, 1);
    const i = this.take(n, what);
    return this.buf.toString("utf8", i, i + n);
  }
}
