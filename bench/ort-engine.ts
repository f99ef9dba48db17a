/** ortserve's own runner (DecoderSession) as a benchmark engine. */
import { DecoderSession } from "../src/core/runner/decoder-session.ts";
import { argmax } from "../src/core/runner/greedy.ts";
import type { ModelFormat } from "../src/core/runner/ort-session.ts";
import type { BenchEngine, DecodeResult, PrefillResult } from "./engine.ts";
import { nowSeconds } from "./stats.ts";

export async function openOrtEngine(
  modelDir: string,
  format: ModelFormat,
  threads: number,
): Promise<BenchEngine> {
  const session = await DecoderSession.load(modelDir, { format, intraOpThreads: threads });
  const notes: Record<string, unknown> = {};
  return {
    name: `ort-${format}`,
    notes,
    async prefill(prompt): Promise<PrefillResult> {
      const seq = session.newSequence();
      try {
        const t0 = nowSeconds();
        await seq.forward(prompt);
        const seconds = nowSeconds() - t0;
        notes.trimsLogits = session.trimsLogits;
        return { seconds };
      } finally {
        seq.dispose();
      }
    },
    async decode(prompt, n): Promise<DecodeResult> {
      const seq = session.newSequence();
      try {
        let logits = await seq.forward(prompt);
        const ids = [argmax(logits)];
        const t0 = nowSeconds();
        for (let i = 0; i < n; i++) {
          logits = await seq.forward([ids[ids.length - 1]]);
          ids.push(argmax(logits));
        }
        return { seconds: nowSeconds() - t0, ids };
      } finally {
        seq.dispose();
      }
    },
    close: () => session.release(),
  };
}
