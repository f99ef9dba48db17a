/**
 * llama.cpp through node-llama-cpp as the serving reference: several sequences of one context
 * decoded concurrently (node-llama-cpp batches their evaluations into one llama_decode).
 */
import { getLlama, type Token } from "node-llama-cpp";
import { nowSeconds } from "./stats.ts";

export interface LlamaServing {
  /** Greedy decode of all prompts at once; aggregate generated tokens per second. */
  aggregate(prompts: number[][], newTokens: number): Promise<number>;
  /** Seconds from a cleared sequence to the first generated token of `prompt`. */
  ttft(prompt: number[]): Promise<number>;
  close(): Promise<void>;
}

export async function openLlamaServing(
  ggufPath: string,
  opts: { sequences: number; contextPerSequence: number; threads: number },
): Promise<LlamaServing> {
  const llama = await getLlama({ gpu: false, build: "never" });
  const model = await llama.loadModel({ modelPath: ggufPath, gpuLayers: 0 });
  const context = await model.createContext({
    sequences: opts.sequences,
    contextSize: opts.sequences * opts.contextPerSequence,
    batchSize: 1024,
    threads: { ideal: opts.threads, min: opts.threads },
  });
  const sequences = Array.from({ length: opts.sequences }, () => context.getSequence());

  async function generate(
    seq: (typeof sequences)[number],
    prompt: number[],
    n: number,
    onFirst?: () => void,
  ) {
    let count = 0;
    for await (const _ of seq.evaluate(prompt as Token[], { temperature: 0 })) {
      if (count === 0) onFirst?.();
      if (++count >= n) break;
    }
    return count;
  }

  return {
    async aggregate(prompts, newTokens) {
      await Promise.all(sequences.map((s) => s.clearHistory()));
      const t0 = nowSeconds();
      const counts = await Promise.all(prompts.map((p, i) => generate(sequences[i]!, p, newTokens)));
      return counts.reduce((a, b) => a + b, 0) / (nowSeconds() - t0);
    },
    async ttft(prompt) {
      const seq = sequences[0]!;
      await seq.clearHistory();
      const t0 = nowSeconds();
      let first = 0;
      await generate(seq, prompt, 1, () => {
        first = nowSeconds() - t0;
      });
      return first;
    },
    async close() {
      await context.dispose();
      await model.dispose();
      await llama.dispose();
    },
  };
}
