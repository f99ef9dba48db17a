/**
 * The GGUF an installed model was converted from, so llama.cpp runs the very file ortserve's ONNX
 * came from. The conversion stamp records the source's SHA-256; the file is found by name where
 * the model's ortserve.json or the catalogue names one for that hash, else by hashing the GGUFs in
 * the cache (a few seconds per GB; `--gguf` skips the search).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { readStamp } from "../src/models/convert/conversion-stamp.ts";
import { CATALOGUE } from "../src/models/fetch/catalogue.ts";
import { sha256File } from "../src/models/fetch/digest.ts";
import { MODEL_META_FILE } from "../src/models/fetch/model-meta.ts";

function namedSource(modelDir: string, sha: string): string | undefined {
  const metaPath = join(modelDir, MODEL_META_FILE);
  if (existsSync(metaPath)) {
    const source = (
      JSON.parse(readFileSync(metaPath, "utf8")) as { source?: { gguf_file?: string; gguf_sha256?: string } }
    ).source;
    if (source?.gguf_sha256 === sha && source.gguf_file) return source.gguf_file;
  }
  return CATALOGUE.find((e) => e.gguf_sha256 === sha)?.gguf_file;
}

/** The path of `modelDir`'s source GGUF in `ggufDir`; a clear error when it is not there. */
export async function sourceGguf(modelDir: string, ggufDir: string): Promise<string> {
  const stamp = await readStamp(modelDir);
  if (!stamp)
    throw new Error(
      `${modelDir}: no conversion stamp (onnx/.converted.json) naming its GGUF; pass --gguf <file>`,
    );
  const sha = stamp.gguf_sha256;
  const named = namedSource(modelDir, sha);
  if (named && existsSync(join(ggufDir, named))) return join(ggufDir, named);
  const candidates = existsSync(ggufDir)
    ? readdirSync(ggufDir)
        .filter((f) => f.endsWith(".gguf"))
        .map((f) => join(ggufDir, f))
        .filter((p) => statSync(p).isFile())
    : [];
  for (const path of candidates) if ((await sha256File(path)) === sha) return path;
  throw new Error(
    `${modelDir} was converted from a GGUF with SHA-256 ${sha}; no such file in ${ggufDir}: pass --gguf <file>`,
  );
}
