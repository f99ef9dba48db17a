/**
 * One file over HTTP into a cache, resumable and verified: bytes land in `<dest>.partial`; a later
 * run asks for the rest with `Range: bytes=<have>-` and appends when the server answers 206 (a 200
 * starts over). The SHA-256 covers the kept bytes and the new ones, and the file is renamed to its
 * real name only once size and digest match, so the cache never holds an unverified file there.
 * Debt: two processes pulling the same file at once share the `.partial` file; a lock (or a
 * per-process name adopted on resume) would keep them apart.
 */
import { createHash, type Hash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { rename, rm, truncate } from "node:fs/promises";
import { Readable, Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fileSize } from "../../util/file-size.ts";
import { ProgressBar, type ProgressStream } from "../../util/progress.ts";
import { assertSha256 } from "./digest.ts";

export interface Expected {
  size?: number;
  /** SHA-256 of the content (what the hub publishes for LFS files). */
  sha256?: string;
  /** Git blob SHA-1 (what the hub publishes for files stored in git itself). */
  gitSha1?: string;
}

export interface DownloadRequest {
  url: string;
  headers?: Record<string, string>;
  dest: string;
  expected: Expected;
  /** Shown on the progress bar. */
  title: string;
  progressStream?: ProgressStream;
  fetch?: typeof fetch;
}

/** An HTTP answer that is not the file; carries the status so callers can explain it. */
export class HttpStatusError extends Error {
  override name = "HttpStatusError";
  readonly url: string;
  readonly status: number;
  readonly headers: Headers;
  constructor(url: string, status: number, headers: Headers) {
    super(`${url}: HTTP ${status}`);
    this.url = url;
    this.status = status;
    this.headers = headers;
  }
}

/** Content digests that must all match: SHA-256, and git's blob SHA-1 ("blob <size>\0" + bytes). */
function digestsFor(expected: Expected, size: number | undefined): { sha256: Hash; git?: Hash } {
  const sha256 = createHash("sha256");
  if (!expected.gitSha1) return { sha256 };
  // git's digest starts with the size, so it must be known before the first byte.
  if (size === undefined) throw new Error("a git blob SHA-1 can only be checked with the size known");
  return { sha256, git: createHash("sha1").update(`blob ${size}\0`) };
}

class Tap extends Transform {
  readonly #hashes: Hash[];
  readonly #onChunk: (n: number) => void;
  constructor(hashes: Hash[], onChunk: (n: number) => void) {
    super();
    this.#hashes = hashes;
    this.#onChunk = onChunk;
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    for (const h of this.#hashes) h.update(chunk);
    this.#onChunk(chunk.length);
    done(null, chunk);
  }
}

/** The start of a `Content-Range: bytes <start>-<end>/<total>` header, or undefined. */
function rangeStart(header: string | null): number | undefined {
  const m = /^bytes (\d+)-\d+\/(?:\d+|\*)$/.exec(header ?? "");
  return m ? Number(m[1]) : undefined;
}

/** Where the bytes of `dest` wait until they are verified. */
export function partialPath(dest: string): string {
  return `${dest}.partial`;
}

export async function downloadResumable(req: DownloadRequest): Promise<void> {
  const partial = partialPath(req.dest);
  let have = (await fileSize(partial)) ?? 0;
  if (req.expected.size !== undefined && have > req.expected.size) {
    await rm(partial, { force: true });
    have = 0;
  }
  const rest = await requestRest(req, have);
  have = rest.have;
  const total = req.expected.size ?? (have + rest.length || undefined);
  const hashes = digestsFor(req.expected, total);
  const bar = new ProgressBar({ title: req.title, total, unit: "bytes", stream: req.progressStream });
  let done = 0;
  const tap = () =>
    new Tap([hashes.sha256, ...(hashes.git ? [hashes.git] : [])], (n) => {
      done += n;
      bar.update(done);
    });
  try {
    if (have > 0) {
      // The kept bytes count towards the digest: hash them again rather than trust them.
      await pipeline(createReadStream(partial), tap(), async (chunks) => {
        for await (const _ of chunks);
      });
    }
    if (rest.body) {
      await pipeline(
        Readable.fromWeb(rest.body as import("node:stream/web").ReadableStream),
        tap(),
        createWriteStream(partial, { flags: have > 0 ? "a" : "w", flush: true }),
      );
    }
  } catch (err) {
    bar.abort();
    // Keep what arrived: the next run resumes from it.
    throw new Error(`download of ${req.url} interrupted after ${done} bytes: ${(err as Error).message}`);
  }
  try {
    checkContent(req, (await fileSize(partial)) ?? 0, hashes);
  } catch (err) {
    bar.abort();
    // A finished download with the wrong content is worthless: start over next time.
    await rm(partial, { force: true });
    throw err;
  }
  await rename(partial, req.dest);
  bar.done();
}

interface Rest {
  /** Bytes of the partial file the body continues (0 when the server sends the whole file). */
  have: number;
  /** The bytes still to come; null when none are. */
  body: ReadableStream<Uint8Array> | null;
  /** Their Content-Length, NaN when unknown. */
  length: number;
}

/** Ask for what is missing: everything, or `Range: bytes=<have>-` when some bytes are kept. */
async function requestRest(req: DownloadRequest, have: number): Promise<Rest> {
  // Everything arrived last time; only the check and the rename were missed.
  if (have > 0 && have === req.expected.size) return { have, body: null, length: 0 };
  const headers: Record<string, string> = { ...req.headers, "accept-encoding": "identity" };
  if (have > 0) headers.range = `bytes=${have}-`;
  let res: Response;
  try {
    res = await (req.fetch ?? fetch)(req.url, { headers, redirect: "follow" });
  } catch (err) {
    const cause = (err as Error).cause;
    throw new Error(`${req.url}: ${(err as Error).message}${cause ? ` (${String(cause)})` : ""}`);
  }
  const length = Number(res.headers.get("content-length") ?? Number.NaN);
  if (res.status === 206) {
    if (rangeStart(res.headers.get("content-range")) === have) return { have, body: res.body, length };
    await res.body?.cancel();
    throw new Error(
      `${req.url}: the server resumed at the wrong offset (${res.headers.get("content-range")})`,
    );
  }
  if (res.status === 200) {
    if (have > 0) await truncate(partialPath(req.dest), 0);
    return { have: 0, body: res.body, length };
  }
  await res.body?.cancel();
  // Nothing past what we hold: the content check decides whether it is the whole file.
  if (res.status === 416 && have > 0) return { have, body: null, length: 0 };
  throw new HttpStatusError(req.url, res.status, res.headers);
}

function checkContent(req: DownloadRequest, got: number, hashes: { sha256: Hash; git?: Hash }): void {
  const { expected } = req;
  if (expected.size !== undefined && got !== expected.size)
    throw new Error(`${req.url}: got ${got} bytes, expected ${expected.size}`);
  if (expected.sha256) assertSha256(req.url, hashes.sha256.digest("hex"), expected.sha256);
  if (expected.gitSha1) {
    const actual = hashes.git!.digest("hex");
    if (actual !== expected.gitSha1.toLowerCase())
      throw new Error(
        `git blob SHA-1 mismatch for ${req.url}:\n  expected ${expected.gitSha1}\n  actual   ${actual}`,
      );
  }
}
