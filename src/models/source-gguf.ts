/**
 * The GGUF an installed model was converted from, for the scripts that compare ortserve with
 * llama.cpp on the same file (`npm run fidelity -- --model`, `npm run bench -- --model`). Where it
 * is depends on how the model came: the catalogue and the default model's wheel leave it in the
 * GGUF cache, a hub file in the hub cache, a local file where it was. It is the right file only if
 * its SHA-256 is the one the conversion stamp recorded.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { cacheDir, ggufCacheDir } from "../util/paths.ts";
import { readStamp } from "./convert/conversion-stamp.ts";
import { sha256File } from "./fetch/digest.ts";
import { MODEL_META_FILE } from "./fetch/model-meta.ts";

/** Where the source GGUF should be, from the model's ortserve.json; undefined for safetensors. */
export function recordedGgufPath(modelDir: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  let meta: { source?: Record<string, unknown> } | undefined;
  try {
    meta = JSON.parse(readFileSync(join(modelDir, MODEL_META_FILE), "utf8")) as typeof meta;
  } catch {
    return undefined;
  }
  const s = meta?.source ?? {};
  const str = (k: string) => (typeof s[k] === "string" ? (s[k] as string) : undefined);
  switch (s.kind) {
    case "catalogue":
    case "pypi-wheel":
      return str("gguf_file") && join(ggufCacheDir(env), str("gguf_file")!);
    case "hf": {
      const repo = str("repo");
      const file = str("file");
      const commit = str("commit") ?? str("revision");
      return repo && file && commit
        ? join(cacheDir(env), "hf", repo.replace("/", "--"), commit, file)
        : undefined;
    }
    case "file":
      return str("path");
    default:
      return undefined;
  }
}

/**
 * The model's source GGUF, verified against its conversion stamp: where its ortserve.json says,
 * else (a model made by `ortserve convert` records no source) the GGUF in `searchDir` with the
 * stamp's SHA-256, a few seconds per GB hashed. A clear error saying what is missing otherwise.
 */
export async function sourceGguf(modelDir: string, searchDir: string = ggufCacheDir()): Promise<string> {
  const want = (await readStamp(modelDir))?.gguf_sha256;
  if (!want)
    throw new Error(`${modelDir}: no conversion stamp (onnx/.converted.json) records its GGUF's SHA-256`);
  const path = recordedGgufPath(modelDir);
  if (path && existsSync(path)) {
    const got = await sha256File(path);
    if (got !== want)
      throw new Error(`${path} is not the file ${modelDir} was converted from (SHA-256 ${got})`);
    return path;
  }
  const candidates = existsSync(searchDir)
    ? readdirSync(searchDir)
        .filter((f) => f.endsWith(".gguf"))
        .map((f) => join(searchDir, f))
        .filter((p) => statSync(p).isFile())
    : [];
  for (const candidate of candidates) if ((await sha256File(candidate)) === want) return candidate;
  const recorded = path ? ` (recorded at ${path})` : "";
  throw new Error(
    `${modelDir} was converted from a GGUF with SHA-256 ${want}${recorded}; no such file in ${searchDir}: fetch it again or pass --gguf <file>`,
  );
}
