/**
 * Memory for saved KV blocks (the prefix cache's), carved from chunks that live as long as the
 * cache. Under a stream of distinct prompts the prefix cache turns its whole budget over many
 * times an hour; allocating each block on its own left a few hundred KB of the allocator's heap
 * behind per block until a garbage collection freed it, and the process's resident memory crept
 * up with the fragments. Here a block evicted from the cache hands its slot back and the next
 * saved block takes it: after the cache is full, saving a block allocates nothing.
 */

/** The cache's element array: float32, float16 bits, or the 8-bit cache's bytes. */
export type KvArray = Float32Array | Uint16Array | Int8Array;

/** Bytes a chunk aims at: a few dozen blocks of a small model, one of a large one. */
const CHUNK_BYTES = 8 << 20;

export class KvBlockPool {
  readonly blockElements: number;
  private readonly make: (elements: number) => KvArray;
  private readonly blocksPerChunk: number;
  private readonly free: KvArray[] = [];
  private chunks = 0;

  constructor(blockElements: number, elementBytes: number, make: (elements: number) => KvArray) {
    this.blockElements = blockElements;
    this.make = make;
    this.blocksPerChunk = Math.max(1, Math.floor(CHUNK_BYTES / (blockElements * elementBytes)));
  }

  /** Slots allocated so far (in use or free). */
  get slots(): number {
    return this.chunks * this.blocksPerChunk;
  }

  /** A slot of `blockElements` elements, holding whatever its last user left there. */
  take(): KvArray {
    if (this.free.length === 0) {
      const chunk = this.make(this.blocksPerChunk * this.blockElements);
      this.chunks++;
      for (let i = this.blocksPerChunk - 1; i >= 0; i--)
        this.free.push(chunk.subarray(i * this.blockElements, (i + 1) * this.blockElements));
    }
    return this.free.pop()!;
  }

  /** Returns a slot taken from this pool; its contents must not be read again. */
  give(slot: KvArray): void {
    this.free.push(slot);
  }
}
