/**
 * The whole fidelity run, shared by `npm run fidelity` and the vitest suite: llama.cpp reference
 * cases once, then each available ONNX format compared against them, one session at a time.
 *
 * What is judged is the distance from the exact model: llama.cpp on an F32 copy of the GGUF (every
 * tensor dequantized, float32 activations). fp32 must be that function up to float rounding; q4 must
 * be at least as close to it as llama.cpp's own quantized run of the same GGUF, scored against the
 * same reference. Agreement with llama.cpp's quantized run is reported, never judged: its Q8
 * activation arithmetic rounds differently on AVX2 and AVX-512, so it measures the CPU.
 */
import { basename, join } from "node:path";
import type { ModelFormat } from "../../src/core/model/model-files.ts";
import type { KvCacheDtypeSetting } from "../../src/core/types.ts";
import {
  describeQ8kActivations,
  describeQuantUses,
  type QuantTypeUse,
  readQ8kActivations,
  readQuantReport,
} from "../../src/models/convert/quant-report.ts";
import { modelsDir } from "../../src/util/paths.ts";
import { type ParityReport, tokenizerParity } from "../tokenizer/parity.ts";
import { referenceSelfConsistency, type SelfConsistency } from "./calibration.ts";
import {
  type Candidate,
  compareFormat,
  DECISIVE_GAP,
  EXACT_MAX_LOGPROB_MAD,
  EXACT_MIN_TOP1,
  exactFormatFailures,
  type FormatFigures,
  quantizedFormatFailures,
} from "./compare.ts";
import { ensureExactGguf } from "./exact-gguf.ts";
import { LlamaReference, llamaCppSystemInfo, referenceGgufPath } from "./llama-reference.ts";
import { type MachineFigures, machineFigures } from "./machine.ts";
import { hasConvertedModel, type OrtCandidate, openOrtCandidate } from "./ort-candidate.ts";
import { type FidelityPrompt, fidelityPrompts } from "./prompts.ts";
import { buildReferenceCases, type FidelityPlan, type ReferenceCase } from "./reference-cases.ts";
import { tokenizerCorpus } from "./tokenizer-corpus.ts";

export const MODEL_ID = "smollm2-135m-instruct";
export const FORMATS: readonly ModelFormat[] = ["fp32", "q4"];
/** Which formats round the model's weights (judged against llama.cpp's quantized run's distance). */
const QUANTIZED: Record<ModelFormat, boolean> = { fp32: false, q4: true };

export function defaultModelDir(): string {
  return join(modelsDir(), MODEL_ID);
}

export interface FidelityOptions extends FidelityPlan {
  prompts?: readonly FidelityPrompt[];
  formats?: readonly ModelFormat[];
  /** Another converted model than the default, with the GGUF it was converted from. */
  modelDir?: string;
  gguf?: string;
  threads?: number;
  /**
   * ortserve's KV cache element type. Default float32, the reference's own setting, so every
   * comparison measures the weights' and activations' arithmetic under one cache precision;
   * "auto" scores each format's serving default (float16 for q4).
   */
  kvCacheDtype?: KvCacheDtypeSetting;
  /**
   * Compare against the exact model (llama.cpp on an F32 copy of the GGUF), which is what the run
   * judges; without it the figures are reported and nothing is judged.
   */
  exact?: boolean;
  /** Also score llama.cpp against itself (see calibration.ts). */
  selfCheck?: boolean;
  log?: (line: string) => void;
}

type PlanFigures = FidelityPlan & { prompts: number; positions: number; positionsFed: number };

export interface FidelityReport {
  model: string;
  reference: { engine: string; gguf: string; settings: string };
  /** The CPU the figures come from: llama.cpp's quantized arithmetic depends on its instruction sets. */
  machine: MachineFigures;
  /** `positions`: teacher-forced positions scored (a prefix shared by several prompts counts once). */
  plan: PlanFigures & { decisiveGap: number };
  /** What `pass` means, in words and numbers. */
  criterion: {
    judged: boolean;
    exact: string;
    quantized: string;
  };
  /** The converter's tokenizer vs llama.cpp's on the shared corpus plus the fidelity prompts. */
  tokenizer: ParityReport;
  /** Against llama.cpp's quantized run of the source GGUF: information (it varies with the CPU). */
  formats: Partial<Record<ModelFormat, FormatFigures>>;
  /**
   * What the converter did per GGUF quant type for q4 (onnx/quantization.json): `requantized`
   * when any tensor is not the file's values (converted with --allow-requantize).
   */
  quantization?: { requantized: boolean; types: QuantTypeUse[] };
  /** Per format, what ran attention and the KV cache's precision (q4 trades exactness for speed). */
  runtime: Partial<Record<ModelFormat, Awaited<ReturnType<OrtCandidate["runtime"]>>>>;
  /** The same figures against the exact model: llama.cpp on the dequantized F32 GGUF. These are judged. */
  exactReference?: {
    gguf: string;
    plan: PlanFigures;
    formats: Partial<Record<ModelFormat, FormatFigures>>;
    /** llama.cpp's own run of the source (quantized) GGUF, scored the same way: the bar for q4. */
    llamaCppQuantized: FormatFigures;
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
  const kvCacheDtype = opts.kvCacheDtype ?? "float32";
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

  const gguf = opts.gguf ?? (await referenceGgufPath(MODEL_ID));
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
    // How far llama.cpp's own quantized inference sits from the exact function: the bar for q4.
    const llamaVsExact = exact
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
      const candidate = await openOrtCandidate(modelDir, format, threads, kvCacheDtype);
      try {
        const figures = await compare(format, cases, candidate);
        formats[format] = figures;
        runtime[format] = await candidate.runtime();
        if (exact && llamaVsExact) {
          const vsExact = await compare(`${format}VsExact`, exact.cases, candidate);
          exactFormats[format] = vsExact;
          failures.push(
            ...(QUANTIZED[format]
              ? quantizedFormatFailures(format, vsExact, llamaVsExact)
              : exactFormatFailures(format, vsExact)),
          );
        }
      } finally {
        await candidate.release();
      }
    }

    const quantTypes = readQuantReport(modelDir);
    const q8kActivations = readQ8kActivations(modelDir);
    const quantization = quantTypes && {
      requantized: quantTypes.some((u) => u.mapping === "requantized"),
      types: quantTypes,
      ...(q8kActivations && { q8kActivations }),
    };
    if (q8kActivations) log(`q4 ${describeQ8kActivations(q8kActivations)}`);
    if (quantization?.requantized)
      log(`q4 is requantized, not the GGUF's values: ${describeQuantUses(quantTypes!).join("; ")}`);
    return {
      model: basename(modelDir),
      quantization,
      reference: {
        engine: "llama.cpp (node-llama-cpp, CPU)",
        gguf,
        settings: "flash attention off, F32 KV cache, whole sequence in one batch",
      },
      machine: machineFigures(await llamaCppSystemInfo()),
      plan: { ...planFigures(plan, cases), decisiveGap: DECISIVE_GAP },
      runtime,
      criterion: {
        judged: exact !== undefined,
        exact: `fp32 against the exact model: top-1 equal at >= ${EXACT_MIN_TOP1 * 100}% of positions, mean logprob error < ${EXACT_MAX_LOGPROB_MAD} nats, every ${plan.greedyTokens}-token greedy run identical (median ${plan.greedyTokens})`,
        quantized:
          "q4 against the exact model: decisive top-1 agreement and median identical greedy prefix at least llama.cpp's own quantized run's, scored against the same reference",
      },
      tokenizer,
      formats,
      exactReference: exact && {
        gguf: exact.gguf,
        plan: planFigures(plan, exact.cases),
        formats: exactFormats,
        llamaCppQuantized: llamaVsExact!,
      },
      referenceSelfConsistency: selfConsistency,
      missing,
      failures,
      pass: failures.length === 0 && Object.keys(formats).length > 0 && exact !== undefined,
      seconds,
    };
  } finally {
    await ref.dispose();
  }
}
