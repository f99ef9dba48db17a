/**
 * Runs the GGUF → ONNX converter with a progress bar and records the result in
 * the conversion stamp. The converter module is loaded lazily so commands that
 * never convert (e.g. `setup --fetch-only`, `--help`) do not pay for loading it.
 */
import { isAbsolute, relative, resolve } from "node:path";
import { ProgressBar, type ProgressStream } from "../../util/progress.ts";
import type { ModelFormat } from "../fetch/model-meta.ts";
import { type ConversionStamp, nextStamp, readStamp, writeStamp } from "./conversion-stamp.ts";
import {
  describeQ8kActivations,
  describeQuantUses,
  type Q8kActivations,
  type QuantTypeUse,
} from "./quant-report.ts";

export type ConvertFn = (
  ggufPath: string,
  outDir: string,
  opts: {
    format: ModelFormat;
    allowRequantize?: boolean;
    q8kActivations?: boolean;
    onProgress?: (done: number, total: number, label: string) => void;
  },
) => Promise<{ files: string[]; quantTypes?: QuantTypeUse[]; q8kActivations?: Q8kActivations }>;

export interface Converter {
  convertGguf: ConvertFn;
  version: string;
}

export async function loadConverter(): Promise<Converter> {
  const mod = await import("./convert.ts");
  return { convertGguf: mod.convertGguf, version: mod.CONVERTER_VERSION };
}

export interface ConvertJob {
  ggufPath: string;
  ggufSha256: string;
  modelDir: string;
  format: ModelFormat;
  converter: Converter;
  /** See ConvertOptions.allowRequantize. */
  allowRequantize?: boolean;
  /** See ConvertOptions.q8kActivations. */
  q8kActivations?: boolean;
  progressStream?: ProgressStream;
  /** Where the per-type quantization lines go (default: stderr). */
  log?: (line: string) => void;
}

/** Store converter-reported paths relative to the model dir, whichever way they came. */
function relativeToModel(modelDir: string, file: string): string {
  const abs = isAbsolute(file) ? file : resolve(modelDir, file);
  return relative(modelDir, abs).split("\\").join("/");
}

export async function convertAndStamp(job: ConvertJob): Promise<ConversionStamp> {
  const previous = await readStamp(job.modelDir);
  const bar = new ProgressBar({
    title: `Converting to ONNX (${job.format})`,
    unit: "count",
    stream: job.progressStream,
  });
  let result: { files: string[]; quantTypes?: QuantTypeUse[]; q8kActivations?: Q8kActivations };
  try {
    result = await job.converter.convertGguf(job.ggufPath, job.modelDir, {
      format: job.format,
      allowRequantize: job.allowRequantize,
      q8kActivations: job.q8kActivations,
      onProgress: (done, total, label) => bar.update(done, total, label),
    });
  } catch (err) {
    bar.abort();
    throw err;
  }
  bar.done(`${result.files.length} files written to ${job.modelDir}`);
  const log = job.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  for (const line of describeQuantUses(result.quantTypes ?? [])) log(`  ${line}`);
  if (result.q8kActivations) log(`  ${describeQ8kActivations(result.q8kActivations)}`);
  const want = { ggufSha256: job.ggufSha256, converterVersion: job.converter.version, format: job.format };
  const files = result.files.map((f) => relativeToModel(job.modelDir, f));
  const stamp = nextStamp(previous, want, files);
  await writeStamp(job.modelDir, stamp);
  return stamp;
}
