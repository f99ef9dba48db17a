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
import { rename, rm, stat, truncate } from "node:fs/promises";
import { Readable, Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
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

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw err;
  }
}

/** Content digests that must all match: SHA-256, and git's blob SHA-1 ("blob <size>\0" + bytes). */
function digestsFor(expected: Expected, size: number | undefined): { sha256: Hash; git?: Hash } {
  const sha256 = createHash("sha256");
  if (!expected.gitSha1 || size === undefined) return { sha256 };
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

export async function downloadResumable(req: DownloadRequest): Promise<void> {
  const doFetch = req.fetch ?? fetch;
  const partial = `${req.dest}.partial`;
  let have = await sizeOf(partial);
  if (req.expected.size !== undefined && have > req.expected.size) {
    await rm(partial, { force: true });
    have = 0;
  }
  let res: Response;
  if (have > 0 && have === req.expected.size) {
    // Everything arrived last time; only the check and the rename were missed.
    res = new Response(null, { status: 206, headers: { "content-range": `bytes ${have}-${have}/${have}` } });
  } else {
    const headers = { ...req.headers, "accept-encoding": "identity" };
    if (have > 0) Object.assign(headers, { range: `bytes=${have}-` });
    try {
      res = await doFetch(req.url, { headers, redirect: "follow" });
    } catch (err) {
      throw new Error(`${req.url}: ${(err as Error).message} (${String((err as Error).cause ?? "")})`);
    }
    if (res.status === 206 && rangeStart(res.headers.get("content-range")) !== have) {
      await res.body?.cancel();
      throw new Error(
        `${req.url}: the server resumed at the wrong offset (${res.headers.get("content-range")})`,
      );
    }
    if (res.status === 416 && have > 0) {
      // Nothing past what we hold: the digest check below decides whether it is the whole file.
      await res.body?.cancel();
      res = new Response(null, { status: 206 });
    } else if (res.status === 200 && have > 0) {
      await truncate(partial, 0);
      have = 0;
    } else if (res.status !== 200 && res.status !== 206) {
      await res.body?.cancel();
      throw new HttpStatusError(req.url, res.status, res.headers);
    }
  }

  const total =
    req.expected.size ?? (have + Number(res.headers.get("content-length") ?? Number.NaN) || undefined);
  const digests = digestsFor(req.expected, total);
  const hashes = [digests.sha256, ...(digests.git ? [digests.git] : [])];
  const bar = new ProgressBar({ title: req.title, total, unit: "bytes", stream: req.progressStream });
  let done = 0;
  const tick = (n: number) => {
    done += n;
    bar.update(done);
  };
  try {
    if (have > 0) {
      // The kept bytes count towards the digest: hash them again rather than trust them.
      await pipeline(createReadStream(partial), new Tap(hashes, tick), async (chunks) => {
        for await (const _ of chunks);
      });
    }
    if (res.body) {
      await pipeline(
        Readable.fromWeb(res.body as import("node:stream/web").ReadableStream),
        new Tap(hashes, tick),
        createWriteStream(partial, { flags: have > 0 ? "a" : "w", flush: true }),
      );
    }
  } catch (err) {
    bar.abort();
    // Keep what arrived: the next run resumes from it.
    throw new Error(`download of ${req.url} interrupted after ${done} bytes: ${(err as Error).message}`);
  }
  const got = await sizeOf(partial);
  try {
    if (req.expected.size !== undefined && got !== req.expected.size)
      throw new Error(`${req.url}: got ${got} bytes, expected ${req.expected.size}`);
    if (req.expected.sha256) assertSha256(req.url, digests.sha256.digest("hex"), req.expected.sha256);
    if (digests.git && req.expected.gitSha1) {
      const actual = digests.git.digest("hex");
      if (actual !== req.expected.gitSha1.toLowerCase())
        throw new Error(
          `git blob SHA-1 mismatch for ${req.url}:\n  expected ${req.expected.gitSha1}\n  actual   ${actual}`,
        );
    }
  } catch (err) {
    bar.abort();
    // A finished download with the wrong content is worthless: start over next time.
    await rm(partial, { force: true });
    throw err;
  }
  await rename(partial, req.dest);
  bar.done();
}
