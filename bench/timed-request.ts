/** One request's timing as the benches report it: time to the first token, decode rate after it. */
import type { Engine, GenerateRequest } from "../src/engine/engine.ts";
import { nowSeconds } from "./stats.ts";

export interface Timed {
  ttft: number;
  /** Tokens per second between the first and the last token. */
  decodeRate: number;
  tokens: number;
}

export async function timed(engine: Pick<Engine, "generate">, req: GenerateRequest): Promise<Timed> {
  const t0 = nowSeconds();
  let first = 0;
  let last = 0;
  let tokens = 0;
  await engine.generate(req, {
    onEvent: (e) => {
      if (e.type !== "delta") return;
      last = nowSeconds();
      if (tokens === 0) first = last;
      tokens += e.tokenIds.length;
    },
  });
  return { ttft: first - t0, decodeRate: (tokens - 1) / (last - first), tokens };
}
