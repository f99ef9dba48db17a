/**
 * What `ortserve pull <source>` names: a file or directory on disk, a Hugging Face hub file or
 * repo (`hf:`), or a built-in catalogue entry — and the model id each gets by default.
 */
import { statSync } from "node:fs";
import { basename, resolve } from "node:path";
import { type CatalogueEntry, catalogueEntry, catalogueNames } from "../fetch/catalogue.ts";
import { type HubSpec, parseHubSpec } from "../fetch/hf-hub.ts";

export type PullSource =
  | { kind: "catalogue"; entry: CatalogueEntry }
  | { kind: "hub"; spec: HubSpec }
  | { kind: "gguf-file"; path: string }
  | { kind: "safetensors-dir"; path: string };

/** llama.cpp's split GGUF naming: `<name>-00001-of-00003.gguf`. */
const SPLIT_GGUF = /-\d{5}-of-\d{5}\.gguf$/;

function refuseSplit(source: string, file: string): void {
  // Debt: split GGUFs are refused rather than read part by part.
  if (SPLIT_GGUF.test(file))
    throw new Error(
      `${source}: a split GGUF (one of several -of- files) is not supported; merge the parts with llama.cpp's \`llama-gguf-split --merge\` and pull the merged file`,
    );
}

export function parsePullSource(source: string): PullSource {
  if (source.startsWith("hf:")) {
    const spec = parseHubSpec(source);
    if (spec.file !== undefined && !spec.file.endsWith(".gguf"))
      throw new Error(`${source}: a hub file must be a .gguf (or name only the repo for its safetensors)`);
    if (spec.file !== undefined) refuseSplit(source, spec.file);
    return { kind: "hub", spec };
  }
  const entry = catalogueEntry(source);
  if (entry) return { kind: "catalogue", entry };
  const info = statSync(source, { throwIfNoEntry: false });
  if (info?.isFile()) {
    if (!source.endsWith(".gguf")) throw new Error(`${source}: a local file must be a .gguf`);
    refuseSplit(source, source);
    return { kind: "gguf-file", path: resolve(source) };
  }
  if (info?.isDirectory()) return { kind: "safetensors-dir", path: resolve(source) };
  throw new Error(
    `"${source}" is not a catalogue name, an hf:<org>/<repo>[/<file.gguf>][@<revision>] source, ` +
      `or a .gguf file or safetensors directory on disk; the catalogue has: ${catalogueNames().join(", ")}`,
  );
}

/** The served id a source gets unless --name says otherwise: lowercase, no extension. */
export function defaultModelId(source: PullSource): string {
  switch (source.kind) {
    case "catalogue":
      return source.entry.id;
    case "hub":
      return (
        source.spec.file ? basename(source.spec.file, ".gguf") : source.spec.repo.split("/")[1]!
      ).toLowerCase();
    case "gguf-file":
      return basename(source.path, ".gguf").toLowerCase();
    case "safetensors-dir":
      return basename(source.path).toLowerCase();
  }
}
