/**
 * Working buffers for one sample() call. They carry nothing from one call to
 * the next, so every sampler on a thread shares one set per vocabulary size
 * (sampling is synchronous) instead of holding ~1.7 MB each at a 49k vocabulary.
 */
import { Candidates } from "./ops/candidates.ts";

export class SamplerScratch {
  /** The model's row after the structured-output mask. */
  readonly raw: Float32Array;
  /** The row after stages 2-6. */
  readonly work: Float32Array;
  /** Output-token counts for penalties; all zero between calls. */
  readonly counts: Int32Array;
  readonly candidates: Candidates;

  constructor(vocabSize: number) {
    this.raw = new Float32Array(vocabSize);
    this.work = new Float32Array(vocabSize);
    this.counts = new Int32Array(vocabSize);
    this.candidates = new Candidates(vocabSize);
  }
}

const shared = new Map<number, SamplerScratch>();

/** This thread's scratch for a vocabulary size. */
export function sharedScratch(vocabSize: number): SamplerScratch {
  let s = shared.get(vocabSize);
  if (!s) {
    s = new SamplerScratch(vocabSize);
    shared.set(vocabSize, s);
  }
  return s;
}
