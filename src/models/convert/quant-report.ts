/**
 * What the converter did with each GGUF quant type: mapped exactly onto the kernels' blocks (and
 * in which form), or requantized. Written beside the model (onnx/quantization.json) so the
 * fidelity report can say when a model is not the file's.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ggmlTypeName } from "../gguf/ggml-types.ts";
import type { GgmlTypeId } from "../gguf/types.ts";
import type { NBitsWeight } from "./quantized-weights.ts";

export const QUANT_REPORT_FILE = "quantization.json";

export interface QuantTypeUse {
  /** GGUF type name, e.g. "Q4_K". */
  type: string;
  /** "exact": the file's values; "requantized": 8-bit blocks of its dequantized values. */
  mapping: "exact" | "requantized";
  /** How the kernels store it, e.g. "4-bit, scales per 32, offsets", or "float32". */
  stored: string;
  tensors: number;
  weights: number;
}

/** A packed weight's form, as the report names it. */
export function storedForm(w: NBitsWeight): string {
  return `${w.bits}-bit, scales per ${w.blockSize}${w.offsets ? ", offsets" : ""}`;
}

export class QuantReport {
  private readonly uses = new Map<string, QuantTypeUse>();

  add(type: GgmlTypeId, exact: boolean, w: NBitsWeight): void {
    this.count(type, exact ? "exact" : "requantized", storedForm(w), w.n * w.k);
  }

  /** A tensor kept as float32 values (exact: a float file's, or a quantized part stacked beside one). */
  addFloats(type: GgmlTypeId, n: number, k: number): void {
    this.count(type, "exact", "float32", n * k);
  }

  /** A tensor kept in its own 16-bit float format (exact: the file's bits). */
  addHalves(type: GgmlTypeId, n: number, k: number): void {
    this.count(type, "exact", "16-bit float", n * k);
  }

  private count(type: GgmlTypeId, mapping: QuantTypeUse["mapping"], stored: string, weights: number): void {
    const use: QuantTypeUse = { type: ggmlTypeName(type), mapping, stored, tensors: 0, weights: 0 };
    const key = `${use.type}|${use.mapping}|${use.stored}`;
    const entry = this.uses.get(key) ?? use;
    entry.tensors++;
    entry.weights += weights;
    this.uses.set(key, entry);
  }

  entries(): QuantTypeUse[] {
    return [...this.uses.values()].sort((a, b) => b.weights - a.weights);
  }
}

/** One line per type, for the converter's output. */
export function describeQuantUses(uses: QuantTypeUse[]): string[] {
  return uses.map(
    (u) => `${u.type}: ${u.mapping} (${u.stored}), ${u.tensors} tensor${u.tensors === 1 ? "" : "s"}`,
  );
}

/**
 * With `q8kActivations`: how many of the model's quantized projections take their activations in
 * llama.cpp's Q8_K blocks of 256 (the rest, stacked with a 32-element type, in blocks of 32).
 */
export interface Q8kActivations {
  projections: number;
  of: number;
}

export function describeQ8kActivations(a: Q8kActivations): string {
  return `activations: llama.cpp's Q8_K blocks of 256 in ${a.projections} of ${a.of} projections (the rest in blocks of 32)`;
}

/** The Q8_K activations a conversion recorded in its report, if it was asked for them. */
export function readQ8kActivations(modelDir: string): Q8kActivations | undefined {
  const path = join(modelDir, "onnx", QUANT_REPORT_FILE);
  if (!existsSync(path)) return undefined;
  return JSON.parse(readFileSync(path, "utf8")).q8kActivations as Q8kActivations | undefined;
}

/** The report a conversion left in `<modelDir>/onnx/`, if any. */
export function readQuantReport(modelDir: string): QuantTypeUse[] | undefined {
  const path = join(modelDir, "onnx", QUANT_REPORT_FILE);
  if (!existsSync(path)) return undefined;
  return JSON.parse(readFileSync(path, "utf8")).types as QuantTypeUse[];
}
