/** Append-only little-endian byte builder for GGUF headers (metadata can run to megabytes). */
export class ByteWriter {
  private buf: Buffer = Buffer.allocUnsafe(1 << 16);
  length = 0;

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
    this.buf.writeUInt8(v, this.reserve(1));
  }

  i8(v: number): void {
    this.buf.writeInt8(v, this.reserve(1));
  }

  u16(v: number): void {
    this.buf.writeUInt16LE(v, this.reserve(2));
  }

  i16(v: number): void {
    this.buf.writeInt16LE(v, this.reserve(2));
  }

  u32(v: number): void {
    this.buf.writeUInt32LE(v, this.reserve(4));
  }

  i32(v: number): void {
    this.buf.writeInt32LE(v, this.reserve(4));
  }

  f32(v: number): void {
    this.buf.writeFloatLE(v, this.reserve(4));
  }

  f64(v: number): void {
    this.buf.writeDoubleLE(v, this.reserve(8));
  }

  u64(v: number | bigint): void {
    this.buf.writeBigUInt64LE(BigInt(v), this.reserve(8));
  }

  i64(v: number | bigint): void {
    this.buf.writeBigInt64LE(BigInt(v), this.reserve(8));
  }

  /** GGUF string: u64 UTF-8 byte length, then the bytes. */
  string(s: string): void {
    const n = Buffer.byteLength(s, "utf8");
    this.u64(n);
    this.buf.write(s, this.reserve(n), n, "utf8");
  }

  zeros(n: number): void {
    this.buf.fill(0, this.reserve(n), this.length);
  }

  /** The bytes written so far (a view, not a copy). */
  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}
