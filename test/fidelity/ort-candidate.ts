/**
 * ortserve's ONNX runner seen through the fidelity `Candidate` interface. Teacher forcing is one
 * prefill pass with every logit row; greedy goes through the runner's own incremental decode, so
 * the KV-cache path is exercised too.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { DecoderSession } from "../../src/core/runner/decoder-session.ts";
import { generateGreedy } from "../../src/core/runner/greedy.ts";
import { type ModelFormat, modelFile } from "../../src/core/runner/ort-session.ts";
import type { Candidate } from "./compare.ts";

export interface OrtCandidate extends Candidate {
  release(): Promise<void>;
}

export function hasConvertedModel(modelDir: string, format: ModelFormat): boolean {
  return existsSync(join(modelDir, "config.json")) && existsSync(modelFile(modelDir, format));
}

export async function openOrtCandidate(
  modelDir: string,
  format: ModelFormat,
  intraOpThreads = 2,
): Promise<OrtCandidate> {
  const session = await DecoderSession.load(modelDir, { format, intraOpThreads });
  const { vocabSize, eosTokenIds } = session.config;
  return {
    vocabSize,
    async teacherForced(tokens) {
      const seq = session.newSequence();
      try {
        return await seq.forward(tokens, { allLogits: true });
      } finally {
        seq.dispose();
      }
    },
    async greedy(promptTokens, n) {
      const seq = session.newSequence();
      try {
        return await generateGreedy(seq, promptTokens, n, eosTokenIds);
      } finally {
        seq.dispose();
      }
    },
    release: () => session.release(),
  };
}
