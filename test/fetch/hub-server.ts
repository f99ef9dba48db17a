/**
 * A local stand-in for the Hugging Face hub, a real node:http server with the hub's URL layout and
 * headers: `/<org>/<repo>/resolve/<revision>/<path>`, `X-Repo-Commit`, LFS files answered with a
 * 302 to a storage host (here `localhost` while the hub is `127.0.0.1`, so the redirect crosses
 * origins as it does on the hub) carrying `X-Linked-Etag` (SHA-256) and `X-Linked-Size`, git files
 * with an `ETag` that is the blob's SHA-1, `X-Error-Code` on 401/404, and Range requests (206).
 * Faults for tests: a file's storage answer cut after some bytes once, content altered in storage.
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface HubRepo {
  commit: string;
  /** Branch and tag names → this commit. */
  refs?: string[];
  /** path → content; `lfs` files are served from storage by SHA-256. */
  files: Record<string, { data: Buffer; lfs?: boolean }>;
  /** When set, every request must carry `Authorization: Bearer <token>`. */
  token?: string;
}

export interface RecordedRequest {
  method: string;
  url: string;
  host: string;
  range?: string;
  authorization?: string;
}

export interface FakeHub {
  /** The hub endpoint (HF_ENDPOINT). */
  url: string;
  requests: RecordedRequest[];
  /** The next storage GET of this SHA-256 sends only this many bytes, then drops the connection. */
  cutOnce: Map<string, number>;
  /** Serves these bytes instead of the content with this SHA-256 (LFS) or git SHA-1 (same length). */
  tampered: Map<string, Buffer>;
  /** Answer ranged GETs with the whole file (200), as a server without Range support does. */
  ignoreRange: boolean;
  close(): Promise<void>;
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const gitSha1 = (b: Buffer) => createHash("sha1").update(`blob ${b.length}\0`).update(b).digest("hex");

/** Answers a possibly ranged GET or HEAD of `data`. */
function sendBody(
  req: IncomingMessage,
  res: ServerResponse,
  data: Buffer,
  headers: Record<string, string>,
  opts: { cut?: number; ignoreRange?: boolean } = {},
): void {
  const cut = opts.cut;
  const m = opts.ignoreRange ? null : /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
  const start = m ? Number(m[1]) : 0;
  if (start > data.length || (m && start === data.length)) {
    res.writeHead(416, { "content-range": `bytes */${data.length}` }).end();
    return;
  }
  const body = data.subarray(start);
  const status = m ? 206 : 200;
  res.writeHead(status, {
    ...headers,
    "accept-ranges": "bytes",
    "content-length": String(body.length),
    ...(m ? { "content-range": `bytes ${start}-${data.length - 1}/${data.length}` } : {}),
  });
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  if (cut === undefined) {
    res.end(body);
    return;
  }
  res.write(body.subarray(0, cut), () => res.socket?.destroy());
}

export async function startFakeHub(repos: Record<string, HubRepo>): Promise<FakeHub> {
  const requests: RecordedRequest[] = [];
  const cutOnce = new Map<string, number>();
  const tampered = new Map<string, Buffer>();
  const blobs = new Map<string, Buffer>();
  for (const repo of Object.values(repos))
    for (const f of Object.values(repo.files)) if (f.lfs) blobs.set(sha256(f.data), f.data);
  let port = 0;
  const faults = { ignoreRange: false };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    requests.push({
      method: req.method ?? "",
      url: url.pathname,
      host: req.headers.host ?? "",
      range: req.headers.range,
      authorization: req.headers.authorization,
    });
    // Storage: content by SHA-256, no auth (the signed URL is the credential on the real hub).
    const storage = /^\/lfs\/([0-9a-f]{64})$/.exec(url.pathname);
    if (storage) {
      const data = blobs.get(storage[1]!);
      if (!data) return void res.writeHead(404).end();
      const cut = req.method === "GET" ? cutOnce.get(storage[1]!) : undefined;
      if (cut !== undefined) cutOnce.delete(storage[1]!);
      sendBody(
        req,
        res,
        tampered.get(storage[1]!) ?? data,
        { "content-type": "application/octet-stream" },
        { cut, ignoreRange: faults.ignoreRange },
      );
      return;
    }
    const m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    if (!m) return void res.writeHead(404, { "x-error-code": "RepoNotFound" }).end();
    const repo = repos[m[1]!];
    const revision = decodeURIComponent(m[2]!);
    const path = m[3]!.split("/").map(decodeURIComponent).join("/");
    if (!repo) return void res.writeHead(401, { "x-error-code": "RepoNotFound" }).end();
    if (repo.token && req.headers.authorization !== `Bearer ${repo.token}`)
      return void res.writeHead(401, { "x-error-code": "GatedRepo" }).end();
    if (revision !== repo.commit && !(repo.refs ?? ["main"]).includes(revision))
      return void res.writeHead(404, { "x-error-code": "RevisionNotFound" }).end();
    const file = repo.files[path];
    if (!file) return void res.writeHead(404, { "x-error-code": "EntryNotFound" }).end();
    const common = { "x-repo-commit": repo.commit };
    if (file.lfs) {
      const digest = sha256(file.data);
      res
        .writeHead(302, {
          ...common,
          location: `http://localhost:${port}/lfs/${digest}`,
          "x-linked-etag": `"${digest}"`,
          "x-linked-size": String(file.data.length),
          etag: `"${gitSha1(Buffer.from(`pointer ${digest}`))}"`,
        })
        .end();
      return;
    }
    const blobSha1 = gitSha1(file.data);
    sendBody(req, res, tampered.get(blobSha1) ?? file.data, { ...common, etag: `"${blobSha1}"` }, faults);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
  // The storage host name resolves to the same server but is another origin.
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    cutOnce,
    tampered,
    get ignoreRange() {
      return faults.ignoreRange;
    },
    set ignoreRange(on: boolean) {
      faults.ignoreRange = on;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export { gitSha1, sha256 };
