/**
 * The stamp `models/<id>/onnx/.converted.json` records what a conversion produced
 * and from what, so `setup` can skip converting again: same GGUF (by SHA-256),
 * same converter version, requested format already there, files still present.
 */
import { access, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { ModelFormat } from "../fetch/model-meta.ts";

export interface ConversionStamp {
  gguf_sha256: string;
  converter_version: string;
  /** Formats whose ONNX files exist, converted from that GGUF by that converter. */
  formats: ModelFormat[];
  /** Files the converter wrote, relative to the model directory. */
  files: string[];
  converted_at: string;
}

/** What a caller needs converted. */
export interface ConversionWant {
  ggufSha256: string;
  converterVersion: string;
  format: ModelFormat;
}

export function stampPath(modelDir: string): string {
  return join(modelDir, "onnx", ".converted.json");
}

/** The stamp, or undefined when it is missing or unreadable (either way: convert). */
export async function readStamp(modelDir: string): Promise<ConversionStamp | undefined> {
  try {
    const stamp = JSON.parse(await readFile(stampPath(modelDir), "utf8")) as ConversionStamp;
    if (
      typeof stamp.gguf_sha256 !== "string" ||
      !Array.isArray(stamp.formats) ||
      !Array.isArray(stamp.files)
    ) {
      return undefined;
    }
    return stamp;
  } catch {
    return undefined;
  }
}

function sameSource(stamp: ConversionStamp, want: ConversionWant): boolean {
  return stamp.gguf_sha256 === want.ggufSha256 && stamp.converter_version === want.converterVersion;
}

/** True when the stamp says the wanted format was already produced from the same inputs. */
export function stampCovers(stamp: ConversionStamp | undefined, want: ConversionWant): boolean {
  return stamp !== undefined && sameSource(stamp, want) && stamp.formats.includes(want.format);
}

/** Whether every file the stamp lists still exists (someone may have deleted one by hand). */
export async function stampFilesPresent(modelDir: string, stamp: ConversionStamp): Promise<boolean> {
  try {
    await Promise.all(stamp.files.map((f) => access(join(modelDir, f))));
    return true;
  } catch {
    return false;
  }
}

/**
 * The stamp after converting `want.format`: formats and files accumulate while the
 * source and converter stay the same, and start over when either changed.
 */
export function nextStamp(
  previous: ConversionStamp | undefined,
  want: ConversionWant,
  files: readonly string[],
  now: Date = new Date(),
): ConversionStamp {
  const keep = previous !== undefined && sameSource(previous, want);
  const formats = new Set<ModelFormat>(keep ? previous.formats : []);
  formats.add(want.format);
  const allFiles = new Set<string>(keep ? previous.files : []);
  for (const f of files) allFiles.add(f);
  return {
    gguf_sha256: want.ggufSha256,
    converter_version: want.converterVersion,
    formats: [...formats].sort(),
    files: [...allFiles].sort(),
    converted_at: now.toISOString(),
  };
}

/** Write via a temp file and rename, so a crash never leaves a half-written stamp. */
export async function writeStamp(modelDir: string, stamp: ConversionStamp): Promise<void> {
  const path = stampPath(modelDir);
  await mkdir(dirname(path), { recursive: true });
  const temp = `${path}.tmp-${process.pid}`;
  await writeFile(temp, `${JSON.stringify(stamp, null, 2)}\n`);
  await rename(temp, path);
}
