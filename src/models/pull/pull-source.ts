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

export function parsePullSource(source: string): PullSource {
  if (source.startsWith("hf:")) {
    const spec = parseHubSpec(source);
    if (spec.file !== undefined && !spec.file.endsWith(".gguf"))
      throw new Error(`${source}: a hub file must be a .gguf (or name only the repo for its safetensors)`);
    return { kind: "hub", spec };
  }
  const entry = catalogueEntry(source);
  if (entry) return { kind: "catalogue", entry };
  const info = statSync(source, { throwIfNoEntry: false });
  if (info?.isFile()) {
    if (!source.endsWith(".gguf")) throw new Error(`${source}: a local file must be a .gguf`);
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
