/**
 * SHA-256 helpers: hashing a file on disk, and a pass-through stage that hashes
 * (and counts) bytes on their way somewhere else, so an extracted file is
 * verified without being read back.
 */
import { createHash, type Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";

/** Hashes and counts what flows through; read `hex()` once the stream has finished. */
export class DigestTap extends Transform {
  readonly #hash: Hash = createHash("sha256");
  readonly #onBytes: ((total: number) => void) | undefined;
  #bytes = 0;

  constructor(onBytes?: (total: number) => void) {
    super();
    this.#onBytes = onBytes;
  }

  get bytes(): number {
    return this.#bytes;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#hash.update(chunk);
    this.#bytes += chunk.length;
    this.#onBytes?.(this.#bytes);
    done(null, chunk);
  }

  hex(): string {
    return this.#hash.digest("hex");
  }
}

/** SHA-256 of a file as lowercase hex, reporting bytes hashed so far. */
export async function sha256File(path: string, onBytes?: (total: number) => void): Promise<string> {
  const tap = new DigestTap(onBytes);
  // Drain into nothing: only the digest matters.
  await pipeline(createReadStream(path, { highWaterMark: 1 << 20 }), tap, async (chunks) => {
    for await (const _ of chunks);
  });
  return tap.hex();
}

/** Throws a readable error when a computed digest differs from the pinned one. */
export function assertSha256(what: string, actual: string, expected: string): void {
  if (actual.toLowerCase() !== expected.toLowerCase()) {
    throw new Error(`SHA-256 mismatch for ${what}:\n  expected ${expected}\n  actual   ${actual}`);
  }
}
