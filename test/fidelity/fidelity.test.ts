/**
 * Fidelity against llama.cpp on the default model, on a shorter plan than `npm run fidelity`
 * (16 continuation tokens instead of 48) to fit the test budget. Skips when the cached GGUF is
 * missing; produces the fp32 flavour when absent (`npm test`'s setup only builds q4).
 *
 * What is asserted, and why:
 * - top-1 agreement with llama.cpp on the Q4_1 GGUF at >= 99% of decisive positions (top-2 gap
 *   > 0.1 nats), for fp32 and q4 — the issue's threshold;
 * - the fp32 model against llama.cpp on a dequantized F32 copy of the same GGUF (float32
 *   activations on both sides): every greedy continuation identical for 32 tokens and top-1 equal
 *   at >= 99.9% of positions — the computation itself is exact;
 * - greedy continuations against llama.cpp's *quantized* run: llama.cpp rounds activations to
 *   8 bits, which flips near-ties, so identical 32-token runs are not attainable by any exact
 *   implementation (llama.cpp's own Q4_1 run against its F32 copy has a median identical prefix
 *   of 22; against itself with default settings, 26). The test asserts the median is at least 16
 *   and `npm run fidelity` reports the issue's stricter criterion (median 32) as failed.
 */
import { existsSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { runSetup } from "../../src/cli/commands/setup.ts";
import { MIN_DECISIVE_AGREEMENT } from "./compare.ts";
import { referenceGgufPath } from "./llama-reference.ts";
import { hasConvertedModel } from "./ort-candidate.ts";
import { defaultModelDir, type FidelityReport, FORMATS, MODEL_ID, runFidelity } from "./suite.ts";

const GREEDY_TOKENS = 32;
/** Calibrated on llama.cpp's own quantized-vs-exact spread (see the header). */
const MIN_GREEDY_MEDIAN_VS_QUANTIZED = 16;
const ready = hasConvertedModel(defaultModelDir(), "q4") && existsSync(await referenceGgufPath(MODEL_ID));

describe.skipIf(!ready)("fidelity against llama.cpp", () => {
  let report: FidelityReport;
  beforeAll(async () => {
    if (!hasConvertedModel(defaultModelDir(), "fp32")) await runSetup({ format: "fp32", log: () => {} });
    report = await runFidelity({
      continuationTokens: 16,
      greedyTokens: GREEDY_TOKENS,
      formats: [...FORMATS],
      exact: true,
    });
    // A few minutes on 2 idle cores; the margin is for a machine shared with other jobs.
  }, 1_200_000);

  it("covers the whole prompt set, with an exact tokenizer", () => {
    expect(report.plan.prompts).toBeGreaterThanOrEqual(20);
    expect(report.plan.positions).toBeGreaterThan(1000);
    expect(report.tokenizer.identical).toBe(report.tokenizer.total);
    expect(report.tokenizer.roundTrips).toBe(report.tokenizer.total);
  });

  for (const format of FORMATS) {
    describe(format, () => {
      it(`agrees on llama.cpp's top-1 at >= ${MIN_DECISIVE_AGREEMENT * 100}% of decisive positions`, () => {
        const f = report.formats[format]!;
        expect(f.decisiveTop1Agreement, JSON.stringify(f.decisiveMisses.slice(0, 5))).toBeGreaterThanOrEqual(
          MIN_DECISIVE_AGREEMENT,
        );
      });

      it(`follows llama.cpp's quantized greedy runs for a median of >= ${MIN_GREEDY_MEDIAN_VS_QUANTIZED} tokens`, () => {
        const g = report.formats[format]!.greedy!;
        expect(g.median, JSON.stringify(g.divergences)).toBeGreaterThanOrEqual(
          MIN_GREEDY_MEDIAN_VS_QUANTIZED,
        );
      });
    });
  }

  it("fp32 computes the same function as llama.cpp with float32 activations", () => {
    const exact = report.exactReference!.formats.fp32!;
    expect(exact.overallTop1Agreement).toBeGreaterThanOrEqual(0.999);
    expect(exact.greedy!.median).toBe(GREEDY_TOKENS);
    expect(exact.refTop1LogprobMad).toBeLessThan(1e-3);
  });
});
