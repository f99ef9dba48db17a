/**
 * ik_llama.cpp's `llama-server`, the fastest CPU fork of llama.cpp, built from a source snapshot
 * (no registry ships it): a source tree, or a git directory whose HEAD is extracted file by file.
 * A snapshot may lack large blobs (the web UI's, the vocab test models); those files are skipped
 * and listed, since the server target does not read them. Built like bench/llama-server.ts's
 * binary and cached in <ORTSERVE_CACHE_DIR or repo/.cache>/ik-llama-server/<commit or dir>/.
 *
 *   node bench/ik-llama-server.ts --source <git dir | source tree>   # build if missing, print the path
 *
 * The path goes to `npm run bench -- --ik-llama-server <binary>`.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { cacheDir } from "../src/util/paths.ts";
import { buildServerTarget } from "./llama-server.ts";

const log = (line: string) => process.stderr.write(`${line}\n`);

function git(gitDir: string, args: string[], encoding: "buffer" | "utf8" = "utf8") {
  return spawnSync("git", ["--git-dir", gitDir, ...args], {
    encoding: encoding === "utf8" ? "utf8" : "buffer",
    maxBuffer: 1 << 30,
  });
}

/** Writes HEAD's files of a git directory into `into`; returns the paths whose blobs are absent. */
async function extractHead(gitDir: string, into: string): Promise<string[]> {
  const listing = git(gitDir, ["ls-tree", "-r", "-z", "HEAD"]);
  if (listing.status !== 0) throw new Error(`${gitDir}: git ls-tree failed: ${listing.stderr}`);
  const missing: string[] = [];
  for (const entry of (listing.stdout as string).split("\0")) {
    if (!entry) continue;
    const tab = entry.indexOf("\t");
    const [mode, type, sha] = entry.slice(0, tab).split(" ");
    const path = join(into, entry.slice(tab + 1));
    if (type !== "blob") continue; // submodules: the server target uses none
    const blob = git(gitDir, ["cat-file", "blob", sha], "buffer");
    if (blob.status !== 0) {
      missing.push(entry.slice(tab + 1));
      continue;
    }
    await mkdir(dirname(path), { recursive: true });
    if (mode === "120000") await symlink((blob.stdout as Buffer).toString(), path);
    else {
      await writeFile(path, blob.stdout as Buffer);
      if (mode === "100755") await chmod(path, 0o755);
    }
  }
  return missing;
}

export async function ensureIkLlamaServer(source: string): Promise<string> {
  const src = resolve(source);
  const isGitDir = existsSync(join(src, "HEAD")) && existsSync(join(src, "objects"));
  const head = isGitDir ? (git(src, ["rev-parse", "HEAD"]).stdout as string).trim() : "";
  const dir = join(cacheDir(), "ik-llama-server", head ? head.slice(0, 12) : basename(src));
  const binary = join(dir, "llama-server");
  if (existsSync(binary)) return binary;
  await mkdir(dir, { recursive: true });
  let tree = src;
  if (isGitDir) {
    tree = join(dir, "src");
    await rm(tree, { recursive: true, force: true });
    log(`ik_llama.cpp: extracting ${head} from ${src}`);
    const missing = await extractHead(src, tree);
    if (missing.length > 0)
      log(
        `ik_llama.cpp: ${missing.length} files absent from the snapshot (not needed by the server): ${missing.join(", ")}`,
      );
  }
  await buildServerTarget(tree, join(dir, "build"), binary, ["-DLLAMA_BUILD_EXAMPLES=ON"]);
  await rm(join(dir, "build"), { recursive: true, force: true });
  if (isGitDir) await rm(tree, { recursive: true, force: true });
  log(`ik_llama.cpp: built ${binary}`);
  return binary;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { source: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help || !values.source) {
    log("usage: node bench/ik-llama-server.ts --source <ik_llama.cpp git dir or source tree>");
    process.exitCode = values.help ? 0 : 2;
  } else console.log(await ensureIkLlamaServer(values.source));
}
