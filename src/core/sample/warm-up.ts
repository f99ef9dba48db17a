/**
 * Runs every sampling path a dozen times on a small vocabulary when the
 * sampler module loads.
 *
 * Why: V8 compiles a long loop on the stack (OSR) during the first full-size
 * call, before the code after the loop has ever run, so that code has no type
 * feedback. V8 then deoptimises there at the end of every later call while
 * reusing the same compiled loop. A few small calls first give every site its
 * feedback; the vocabulary is kept small enough that they do not trigger OSR
 * themselves, and odd-sized (547 = 4k + 3 = 32k + 3) so the unrolled loops'
 * tails and the bitmask's partial word run too.
 */
import { NEUTRAL_SAMPLING, type SampledToken, type SamplingParams } from "./params.ts";
import { SamplerScratch } from "./scratch.ts";

interface Sampler {
  sample(logits: Float32Array, outputTokenIds: readonly number[], mask?: Uint32Array): SampledToken;
}

type SamplerClass = new (
  params: SamplingParams,
  vocabSize: number,
  promptTokenIds: readonly number[],
  scratch: SamplerScratch,
) => Sampler;

const VOCAB = 547;
const ROUNDS = 12;

export function warmUp(Sampler: SamplerClass): void {
  const scratch = new SamplerScratch(VOCAB);
  // Spread values with many ties, a flat stretch (large top-p buckets) and a few -inf.
  const row = Float32Array.from({ length: VOCAB }, (_, i) =>
    i % 97 === 5 ? Number.NEGATIVE_INFINITY : i < 300 ? ((i * 7919) % 101) / 10 : 2,
  );
  const mask = new Uint32Array(Math.ceil(VOCAB / 32)).fill(0xfffffff7);
  const none = new Uint32Array(1);
  const base: SamplingParams = { ...NEUTRAL_SAMPLING, temperature: 0.8, eosTokenIds: [3], seed: 1 };
  const processed: Partial<SamplingParams> = {
    allowedTokenIds: Array.from({ length: 200 }, (_, i) => i * 2),
    badWordsTokenIds: [[4], [6, 8]],
    minTokens: 2,
    stopTokenIds: [10],
    logitBias: { ids: [12], biases: [1.5] },
    repetitionPenalty: 1.2,
    frequencyPenalty: 0.3,
    presencePenalty: 0.2,
  };
  const configs: Partial<SamplingParams>[] = [
    { temperature: 0 },
    { temperature: 0, logprobs: 5 },
    { temperature: 0, logprobs: 0, ...processed },
    {},
    { logprobs: 3 },
    { topK: 20 },
    { topK: 7 }, // the 7th value has ties outside the heap
    { topK: 520 },
    { minP: 0.1 },
    { topP: 0.9 },
    { topP: 0.5, topK: 40, minP: 0.01, ...processed, logprobs: 2 },
  ];
  const output = [6, 1, 2, 2];
  for (const config of configs) {
    const sampler = new Sampler({ ...base, ...config }, VOCAB, [1, 5, 9], scratch);
    for (let i = 0; i < ROUNDS; i++) {
      sampler.sample(row, output.slice(0, i % 5));
      sampler.sample(row, output, mask);
    }
    sampler.sample(row, output, none);
  }
}
