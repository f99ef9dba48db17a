/**
 * llama.cpp (through node-llama-cpp, CPU only, prebuilt binaries) on the same
 * GGUF the ONNX model was converted from. Steps mirror the ORT engine: one
 * prompt batch, then single-token evaluations with greedy selection.
 */
import { readFile } from "node:fs/promises";
import { getLlama, type Token } from "node-llama-cpp";
import type { BenchEngine, DecodeResult, PrefillResult } from "./engine.ts";
import { nowSeconds } from "./stats.ts";

async function packageVersion(): Promise<string> {
  const pkg = new URL("../package.json", import.meta.resolve("node-llama-cpp"));
  return (JSON.parse(await readFile(pkg, "utf8")) as { version: string }).version;
}

const GREEDY = { token: true, options: { temperature: 0 } } as const;

export async function openLlamaEngine(
  ggufPath: string,
  threads: number,
  contextSize: number,
): Promise<BenchEngine> {
  const llama = await getLlama({ gpu: false, build: "never" });
  const model = await llama.loadModel({ modelPath: ggufPath, gpuLayers: 0 });
  const context = await model.createContext({
    contextSize,
    batchSize: contextSize,
    sequences: 1,
    threads: { ideal: threads, min: threads },
  });
  const seq = context.getSequence();

  /** Evaluates the prompt in one batch and returns the greedy next token. */
  async function evalPrompt(prompt: readonly number[]): Promise<Token> {
    const input = prompt.map((id) => id as Token);
    const last = input.pop()!;
    const out = await seq.controlledEvaluate([...input, [last, { generateNext: GREEDY }]]);
    const next = out[prompt.length - 1]?.next.token;
    if (next == null) throw new Error("llama.cpp returned no token for the prompt");
    return next;
  }

  return {
    name: "llama.cpp",
    notes: {
      nodeLlamaCpp: await packageVersion(),
      llamaCpp: llama.llamaCppRelease.release,
      build: llama.buildType,
    },
    async prefill(prompt): Promise<PrefillResult> {
      await seq.clearHistory();
      const t0 = nowSeconds();
      await evalPrompt(prompt);
      return { seconds: nowSeconds() - t0 };
    },
    async decode(prompt, n): Promise<DecodeResult> {
      await seq.clearHistory();
      let tok = await evalPrompt(prompt);
      const ids: number[] = [tok];
      const t0 = nowSeconds();
      for (let i = 0; i < n; i++) {
        const out = await seq.controlledEvaluate([[tok, { generateNext: GREEDY }]]);
        const next = out[0]?.next.token;
        if (next == null) throw new Error("llama.cpp returned no token");
        tok = next;
        ids.push(tok);
      }
      return { seconds: nowSeconds() - t0, ids };
    },
    async close() {
      await context.dispose();
      await model.dispose();
      await llama.dispose();
    },
  };
}
