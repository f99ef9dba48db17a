/** Append-only little-endian byte builder for GGUF headers (metadata can run to megabytes). */
export class ByteWriter {
  private buf: Buffer = Buffer.allocUnsafe(1 << 16);
  length = 0;

  /** Grows the buffer if needed; callers must read `this.buf` only after this returns. */
  private reserve(n: number): number {
    const at = this.length;
    if (at + n > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(at + n, this.buf.length * 2));
      this.buf.copy(grown, 0, 0, at);
      this.buf = grown;
    }
    this.length = at + n;
    return at;
  }

  u8(v: number): void {
    const at = this.reserve(1);
    this.buf.writeUInt8(v, at);
  }

  i8(v: number): void {
    const at = this.reserve(1);
    this.buf.writeInt8(v, at);
  }

  u16(v: number): void {
    const at = this.reserve(2);
    this.buf.writeUInt16LE(v, at);
  }

  i16(v: number): void {
    const at = this.reserve(2);
    this.buf.writeInt16LE(v, at);
  }

  u32(v: number): void {
    const at = this.reserve(4);
    this.buf.writeUInt32LE(v, at);
  }

  i32(v: number): void {
    const at = this.reserve(4);
    this.buf.writeInt32LE(v, at);
  }

  f32(v: number): void {
    const at = this.reserve(4);
    this.buf.writeFloatLE(v, at);
  }

  f64(v: number): void {
    const at = this.reserve(8);
    this.buf.writeDoubleLE(v, at);
  }

  u64(v: number | bigint): void {
    const at = this.reserve(8);
    this.buf.writeBigUInt64LE(BigInt(v), at);
  }

  i64(v: number | bigint): void {
    const at = this.reserve(8);
    this.buf.writeBigInt64LE(BigInt(v), at);
  }

  /** GGUF string: u64 UTF-8 byte length, then the bytes. */
  string(s: string): void {
    const n = Buffer.byteLength(s, "utf8");
    this.u64(n);
    const at = this.reserve(n);
    this.buf.write(s, at, n, "utf8");
  }

  zeros(n: number): void {
    const at = this.reserve(n);
    this.buf.fill(0, at, this.length);
  }

  /** The bytes written so far (a view, not a copy). */
  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}
