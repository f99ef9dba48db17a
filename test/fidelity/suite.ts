/**
 * The whole fidelity run, shared by `npm run fidelity` and the vitest suite: llama.cpp reference
 * cases once, then each available ONNX format compared against them, one session at a time.
 * Thresholds apply to the comparison with llama.cpp on the source (Q4_1) GGUF; the optional exact
 * reference (llama.cpp on a dequantized F32 copy) and self-consistency runs are figures only.
 */
import { join } from "node:path";
import type { ModelFormat } from "../../src/core/model/model-files.ts";
import type { KvCacheDtypeSetting } from "../../src/core/types.ts";
import { modelsDir } from "../../src/util/paths.ts";
import { type ParityReport, tokenizerParity } from "../tokenizer/parity.ts";
import { referenceSelfConsistency, type SelfConsistency } from "./calibration.ts";
import {
  type Candidate,
  compareFormat,
  DECISIVE_GAP,
  type FormatFigures,
  MIN_DECISIVE_AGREEMENT,
  thresholdFailures,
} from "./compare.ts";
import { ensureExactGguf } from "./exact-gguf.ts";
import { LlamaReference, referenceGgufPath } from "./llama-reference.ts";
import { hasConvertedModel, type OrtCandidate, openOrtCandidate } from "./ort-candidate.ts";
import { type FidelityPrompt, fidelityPrompts } from "./prompts.ts";
import { buildReferenceCases, type FidelityPlan, type ReferenceCase } from "./reference-cases.ts";
import { tokenizerCorpus } from "./tokenizer-corpus.ts";

export const MODEL_ID = "smollm2-135m-instruct";
export const FORMATS: readonly ModelFormat[] = ["fp32", "q4"];

export function defaultModelDir(): string {
  return join(modelsDir(), MODEL_ID);
}

export interface FidelityOptions extends FidelityPlan {
  prompts?: readonly FidelityPrompt[];
  formats?: readonly ModelFormat[];
  modelDir?: string;
  threads?: number;
  /** ortserve's KV cache element type (default "auto": each format's own). */
  kvCacheDtype?: KvCacheDtypeSetting;
  /** Also compare against llama.cpp on an F32 (dequantized) copy of the GGUF. */
  exact?: boolean;
  /** Also score llama.cpp against itself (see calibration.ts). */
  selfCheck?: boolean;
  log?: (line: string) => void;
}

type PlanFigures = FidelityPlan & { prompts: number; positions: number; positionsFed: number };

export interface FidelityReport {
  model: string;
  reference: { engine: string; gguf: string; settings: string };
  /** `positions`: teacher-forced positions scored (a prefix shared by several prompts counts once). */
  plan: PlanFigures & { decisiveGap: number };
  thresholds: { decisiveTop1Agreement: number; greedyMedianIdenticalPrefix: number };
  /** The converter's tokenizer vs llama.cpp's on the shared corpus plus the fidelity prompts. */
  tokenizer: ParityReport;
  formats: Partial<Record<ModelFormat, FormatFigures>>;
  /** Per format, what ran attention and the KV cache's precision (q4 trades exactness for speed). */
  runtime: Partial<Record<ModelFormat, Awaited<ReturnType<OrtCandidate["runtime"]>>>>;
  /** The same figures against llama.cpp on the dequantized F32 GGUF (float32 activations). */
  exactReference?: {
    gguf: string;
    plan: PlanFigures;
    formats: Partial<Record<ModelFormat, FormatFigures>>;
    /** llama.cpp on the source GGUF scored the same way (with --calibrate). */
    llamaCppQ4_1?: FormatFigures;
  };
  referenceSelfConsistency?: SelfConsistency;
  /** Formats with no converted model file, and how to produce them. */
  missing: Partial<Record<ModelFormat, string>>;
  failures: string[];
  pass: boolean;
  seconds: Record<string, number>;
}

function planFigures(plan: FidelityPlan, cases: readonly ReferenceCase[]): PlanFigures {
  return {
    ...plan,
    prompts: cases.length,
    positions: cases.reduce((n, c) => n + c.tokens.length - c.firstScored, 0),
    positionsFed: cases.reduce((n, c) => n + c.tokens.length, 0),
  };
}

export async function runFidelity(opts: FidelityOptions): Promise<FidelityReport> {
  const log = opts.log ?? (() => {});
  const modelDir = opts.modelDir ?? defaultModelDir();
  const prompts = opts.prompts ?? fidelityPrompts;
  const threads = opts.threads ?? 2;
  const plan: FidelityPlan = { continuationTokens: opts.continuationTokens, greedyTokens: opts.greedyTokens };
  const seconds: Record<string, number> = {};
  const timed = async <T>(label: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      seconds[label] = Math.round((performance.now() - t0) / 100) / 10;
    }
  };

  const gguf = await referenceGgufPath(MODEL_ID);
  const ref = await LlamaReference.load(gguf, { threads });
  try {
    log(`llama.cpp reference: ${prompts.length} prompts`);
    const cases = await timed("reference", () => buildReferenceCases(ref, prompts, plan));
    const corpus = [...tokenizerCorpus, ...prompts.map((p) => p.text)];
    const tokenizer = await timed("tokenizer", () => tokenizerParity(gguf, corpus));
    const selfConsistency = opts.selfCheck
      ? await timed("referenceSelfConsistency", () =>
          referenceSelfConsistency(ref, gguf, cases, plan, threads, log),
        )
      : undefined;

    let exact: { gguf: string; cases: ReferenceCase[] } | undefined;
    if (opts.exact) {
      const exactGguf = ensureExactGguf(gguf);
      log(`exact reference (llama.cpp on ${exactGguf})`);
      const exactRef = await LlamaReference.load(exactGguf, { threads });
      try {
        exact = {
          gguf: exactGguf,
          cases: await timed("exactReference", () => buildReferenceCases(exactRef, prompts, plan)),
        };
      } finally {
        await exactRef.dispose();
      }
    }

    const detokenize = (ids: readonly number[]) => ref.detokenize(ids);
    const compare = (label: string, cs: readonly ReferenceCase[], candidate: Candidate) =>
      timed(label, () => compareFormat(cs, candidate, { greedyTokens: plan.greedyTokens, detokenize }));
    // How far llama.cpp's own quantized inference sits from the exact function.
    const llamaVsExact =
      exact && opts.selfCheck
        ? await compare("llamaCppVsExact", exact.cases, {
            vocabSize: ref.vocabSize,
            teacherForced: (tokens) => ref.logitRows(tokens),
            greedy: (prompt, n) => ref.greedy(prompt, n),
          })
        : undefined;
    const formats: FidelityReport["formats"] = {};
    const runtime: FidelityReport["runtime"] = {};
    const exactFormats: FidelityReport["formats"] = {};
    const missing: FidelityReport["missing"] = {};
    const failures: string[] = [];
    for (const format of opts.formats ?? FORMATS) {
      if (!hasConvertedModel(modelDir, format)) {
        missing[format] =
          `no ${format} model in ${modelDir}; run: node src/cli/main.ts setup --format ${format}`;
        continue;
      }
      log(`comparing ${format}`);
      const candidate = await openOrtCandidate(modelDir, format, threads, opts.kvCacheDtype);
      try {
        const figures = await compare(format, cases, candidate);
        formats[format] = figures;
        runtime[format] = await candidate.runtime();
        failures.push(...thresholdFailures(format, figures));
        if (exact) exactFormats[format] = await compare(`${format}VsExact`, exact.cases, candidate);
      } finally {
        await candidate.release();
      }
    }

    return {
      model: MODEL_ID,
      reference: {
        engine: "llama.cpp (node-llama-cpp, CPU)",
        gguf,
        settings: "flash attention off, F32 KV cache, whole sequence in one batch",
      },
      plan: { ...planFigures(plan, cases), decisiveGap: DECISIVE_GAP },
      runtime,
      thresholds: {
        decisiveTop1Agreement: MIN_DECISIVE_AGREEMENT,
        greedyMedianIdenticalPrefix: plan.greedyTokens,
      },
      tokenizer,
      formats,
      exactReference: exact && {
        gguf: exact.gguf,
        plan: planFigures(plan, exact.cases),
        formats: exactFormats,
        llamaCppQ4_1: llamaVsExact,
      },
      referenceSelfConsistency: selfConsistency,
      missing,
      failures,
      pass: failures.length === 0 && Object.keys(formats).length > 0,
      seconds,
    };
  } finally {
    await ref.dispose();
  }
}
