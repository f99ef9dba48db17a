/**
 * `ortserve convert`: a GGUF file of an architecture in architectures.ts → a model directory in the Hugging Face layout that
 * ortserve and transformers.js load: config.json, generation_config.json, tokenizer.json,
 * tokenizer_config.json and onnx/<model>.onnx + external data.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { activationBlocksOf, describeModel } from "../../core/runner/attention-graph.ts";
import { openGguf } from "../gguf/reader.ts";
import type { GgufValue } from "../gguf/types.ts";
import { GGUF_ROPE_FREQS, type Hyperparameters, readHyperparameters } from "./architectures.ts";
import { emitDecoderGraph, type WeightProvider } from "./decoder-graph.ts";
import { ggufWeightProvider, type WeightFormat } from "./gguf-weights.ts";
import { buildGenerationConfig, buildModelConfig, onnxFileName, type SpecialTokenIds } from "./hf-config.ts";
import { ExternalDataFile, GraphBuilder } from "./onnx/graph-builder.ts";
import { type Q8kActivations, QUANT_REPORT_FILE, QuantReport, type QuantTypeUse } from "./quant-report.ts";
import { buildTokenizerFiles } from "./tokenizer.ts";

/** Bumped whenever converted output changes, so cached conversions are redone. */
export const CONVERTER_VERSION = "6";

export interface ConvertOptions {
  format: WeightFormat;
  /** See DecoderGraphOptions.accuracyLevel; 4 unless testing. */
  accuracyLevel?: 0 | 4;
  /**
   * q4: requantize weights whose type has no exact mapping (Q8_K) to 8-bit blocks
   * instead of refusing the file. The model is then not the file's, and its quantization report
   * says so.
   */
  allowRequantize?: boolean;
  /**
   * q4: quantize the activations of K-quant weights as llama.cpp does, in Q8_K blocks of 256
   * (default: blocks of 32, closer to the exact model). The quantization report says so.
   */
  q8kActivations?: boolean;
  onProgress?: (done: number, total: number, label: string) => void;
}

/** The weight formats a model directory holds. */
export function convertedFormats(outDir: string): WeightFormat[] {
  return (["q4", "fp32"] as const).filter((f) => existsSync(join(outDir, "onnx", onnxFileName(f))));
}

export function writeJson(path: string, value: unknown): void {
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
}

function tokenIds(metadata: Map<string, GgufValue>): SpecialTokenIds {
  const id = (key: string) => {
    const v = metadata.get(key);
    return typeof v === "number" ? v : undefined;
  };
  // Every id that ends a turn stops generation (Llama 3: <|end_of_text|>, <|eot_id|>, <|eom_id|>).
  const ends = ["eos", "eot", "eom"].map((k) => id(`tokenizer.ggml.${k}_token_id`));
  const eosIds = [...new Set(ends.filter((v): v is number => v !== undefined))];
  return { bosId: id("tokenizer.ggml.bos_token_id"), eosIds, padId: id("tokenizer.ggml.padding_token_id") };
}

/** The written q4 graph's projections, and how many of them the converter recorded for Q8_K activations. */
function q8kProjections(outDir: string): Q8kActivations {
  const model = readFileSync(join(outDir, "onnx", onnxFileName("q4")));
  const recorded = activationBlocksOf(model);
  const weights = describeModel(model)
    .nodes.filter((n) => n.opType === "MatMulNBits")
    .map((n) => n.inputs[1]!);
  return { projections: weights.filter((w) => recorded[w] === 256).length, of: weights.length };
}

export async function convertGguf(
  ggufPath: string,
  outDir: string,
  opts: ConvertOptions,
): Promise<{ files: string[]; quantTypes: QuantTypeUse[]; q8kActivations?: Q8kActivations }> {
  const file = openGguf(ggufPath);
  try {
    const ropeFreqs = file.tensor(GGUF_ROPE_FREQS);
    const hp = readHyperparameters(file.metadata, ropeFreqs && file.dequantize(ropeFreqs));
    const tied = !file.tensor("output.weight");
    const ids = tokenIds(file.metadata);
    const modelName = onnxFileName(opts.format);
    const report = new QuantReport();
    const weights = ggufWeightProvider(file, hp, opts.format, {
      allowRequantize: opts.allowRequantize,
      q8kActivations: opts.q8kActivations,
      report,
    });
    const total = writeDecoderOnnx(outDir, hp, weights, opts);
    const quantTypes = report.entries();
    const reportFile = join("onnx", QUANT_REPORT_FILE);
    const q8kActivations = opts.q8kActivations && opts.format === "q4" ? q8kProjections(outDir) : undefined;
    if (opts.format === "q4") writeJson(join(outDir, reportFile), { types: quantTypes, q8kActivations });
    opts.onProgress?.(total - 1, total, "tokenizer");

    const tokenizer = buildTokenizerFiles(file.metadata, { modelMaxLength: hp.contextLength });
    writeJson(join(outDir, "tokenizer.json"), tokenizer.tokenizerJson);
    writeJson(join(outDir, "tokenizer_config.json"), tokenizer.tokenizerConfigJson);
    writeJson(join(outDir, "config.json"), buildModelConfig(hp, ids, tied, convertedFormats(outDir)));
    writeJson(join(outDir, "generation_config.json"), buildGenerationConfig(ids));
    opts.onProgress?.(total, total, "done");
    return {
      files: [
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        `onnx/${modelName}`,
        `onnx/${modelName}_data`,
        ...(opts.format === "q4" ? [reportFile] : []),
      ].map((f) => join(outDir, f)),
      quantTypes,
      q8kActivations,
    };
  } finally {
    file.close();
  }
}

/**
 * The decoder graph and its external data into `<outDir>/onnx/`, written under temporary names and
 * renamed at the end, so an interrupted run leaves no half model. Returns the progress total.
 */
export function writeDecoderOnnx(
  outDir: string,
  hp: Hyperparameters,
  weights: WeightProvider,
  opts: ConvertOptions,
): number {
  const onnxDir = join(outDir, "onnx");
  mkdirSync(onnxDir, { recursive: true });
  const modelName = onnxFileName(opts.format);
  const tmpModel = join(onnxDir, `.${modelName}.partial`);
  const tmpData = join(onnxDir, `${modelName}_data.partial`);
  const total = hp.layers + 2;
  try {
    const external = new ExternalDataFile(tmpData, `${modelName}_data`);
    const graph = new GraphBuilder(external);
    opts.onProgress?.(0, total, "embeddings");
    try {
      emitDecoderGraph(graph, hp, weights, {
        accuracyLevel: opts.accuracyLevel,
        onLayer: (layer) => opts.onProgress?.(layer + 1, total, `layer ${layer + 1}/${hp.layers}`),
      });
    } finally {
      external.close();
    }
    writeFileSync(tmpModel, graph.encode({ producerVersion: CONVERTER_VERSION }));
    renameSync(tmpData, join(onnxDir, `${modelName}_data`));
    renameSync(tmpModel, join(onnxDir, modelName));
  } catch (err) {
    rmSync(tmpModel, { force: true });
    rmSync(tmpData, { force: true });
    throw err;
  }
  return total;
}
