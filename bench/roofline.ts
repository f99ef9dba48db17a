/**
 * The memory-bandwidth roofline of single-stream decode: a step reads every packed weight of the
 * matmuls once and the KV cache of every position so far, so bandwidth / those bytes is the most
 * tokens a second the memory can feed; the share is how much of that the engine achieves.
 */
export interface DecodeReads {
  /** Packed weight bytes of all matmuls (what the kernels read, not the file's size). */
  weightBytes: number;
  /** KV-cache bytes of one position over all layers (keys and values). */
  kvBytesPerPosition: number;
  /** Mean positions in the cache over the measured steps. */
  meanContext: number;
}

export function bytesPerToken(r: DecodeReads): number {
  return r.weightBytes + r.kvBytesPerPosition * r.meanContext;
}

/** Mean cached positions while decoding `newTokens` after a `promptTokens` prompt. */
export function meanDecodeContext(promptTokens: number, newTokens: number): number {
  return promptTokens + (newTokens - 1) / 2;
}

/** Achieved tok/s × bytes a token reads / bandwidth: 1 is the memory's limit. */
export function rooflineShare(
  tokensPerSecond: number,
  reads: DecodeReads,
  bandwidthBytesPerSecond: number,
): number {
  return (tokensPerSecond * bytesPerToken(reads)) / bandwidthBytesPerSecond;
}
