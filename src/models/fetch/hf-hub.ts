/**
 * Files from the Hugging Face hub, the way huggingface_hub fetches them: `<endpoint>/<org>/<repo>/
 * resolve/<revision>/<file>` (endpoint from HF_ENDPOINT), `Authorization: Bearer $HF_TOKEN`, a
 * HEAD first for the commit (`X-Repo-Commit`), size and digest (`X-Linked-Etag` / `X-Linked-Size`
 * on LFS files: their SHA-256; else `ETag`: the git blob SHA-1), then the download itself, pinned
 * to that commit so every file of one pull comes from the same one.
 */
import { mkdir, stat } from "node:fs/promises";
import { join } from "node:path";
import type { ProgressStream } from "../../util/progress.ts";
import { downloadResumable, type Expected, HttpStatusError } from "./resumable-download.ts";

export const DEFAULT_HF_ENDPOINT = "https://huggingface.co";

/** `hf:<org>/<repo>[/<path/to/file>][@<revision>]`. */
export interface HubSpec {
  repo: string;
  /** A file in the repo; undefined means the repo's safetensors model. */
  file?: string;
  revision: string;
}

const REPO_PART = /^[A-Za-z0-9][\w.-]*$/;

export function parseHubSpec(source: string): HubSpec {
  const body = source.slice("hf:".length);
  const at = body.lastIndexOf("@");
  const path = at < 0 ? body : body.slice(0, at);
  const revision = at < 0 ? "main" : body.slice(at + 1);
  const segments = path.split("/");
  const usage = "expected hf:<org>/<repo>[/<file.gguf>][@<revision>]";
  if (segments.length < 2 || !REPO_PART.test(segments[0]!) || !REPO_PART.test(segments[1]!))
    throw new Error(`${source}: ${usage}`);
  if (revision === "") throw new Error(`${source}: empty revision after "@"`);
  const file = segments.slice(2).join("/");
  if (
    segments.length > 2 &&
    (file === "" || segments.slice(2).some((s) => s === "" || s === ".." || s === "."))
  )
    throw new Error(`${source}: bad file path "${file}"; ${usage}`);
  return { repo: `${segments[0]}/${segments[1]}`, file: file === "" ? undefined : file, revision };
}

export interface HubClient {
  endpoint: string;
  token?: string;
  fetch: typeof fetch;
  progressStream?: ProgressStream;
}

export function hubClient(env: NodeJS.ProcessEnv = process.env, doFetch: typeof fetch = fetch): HubClient {
  return {
    endpoint: (env.HF_ENDPOINT || DEFAULT_HF_ENDPOINT).replace(/\/+$/, ""),
    token: env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN || undefined,
    fetch: doFetch,
  };
}

export function resolveUrl(client: HubClient, repo: string, revision: string, file: string): string {
  const path = file.split("/").map(encodeURIComponent).join("/");
  return `${client.endpoint}/${repo}/resolve/${encodeURIComponent(revision)}/${path}`;
}

function authHeaders(client: HubClient): Record<string, string> {
  return client.token ? { authorization: `Bearer ${client.token}` } : {};
}

export interface HubFileInfo {
  commit: string;
  size: number;
  expected: Expected;
}

/** The hub's etag without quotes or weak marker. */
function normalizeEtag(raw: string | null): string | undefined {
  return raw?.replace(/^W\//, "").replace(/^"|"$/g, "") || undefined;
}

/** The hub answered with an error status; the message says what to do. */
export class HubError extends Error {
  override name = "HubError";
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.status = status;
  }
}

/** A hub answer other than the file, in words that say what to do. */
function explain(
  repo: string,
  file: string,
  revision: string,
  status: number,
  headers: Headers,
  tokenSet: boolean,
): HubError {
  const message = explainText(repo, file, revision, status, headers, tokenSet);
  return new HubError(message, status);
}

function explainText(
  repo: string,
  file: string,
  revision: string,
  status: number,
  headers: Headers,
  tokenSet: boolean,
): string {
  const code = headers.get("x-error-code");
  const what = `hf:${repo}/${file}@${revision}`;
  if (status === 401)
    return tokenSet
      ? `${what}: the hub refused HF_TOKEN (401); check the token and that it may read ${repo}`
      : `${what}: the hub wants a token (401): set HF_TOKEN (the hub also answers 401 for a repo that does not exist)`;
  if (status === 403)
    return `${what}: access denied (403); a gated model's terms are accepted on its hub page`;
  if (status === 404) {
    if (code === "RevisionNotFound") return `${what}: no revision "${revision}" in ${repo}`;
    if (code === "RepoNotFound") return `${what}: no repository ${repo}`;
    return `${what}: ${file} not found in ${repo} at ${revision} (404)`;
  }
  return `${what}: the hub answered HTTP ${status}`;
}

/** HEAD the file: commit, size and digest, following only the hub's own (relative) redirects. */
export async function hubFileInfo(
  client: HubClient,
  repo: string,
  revision: string,
  file: string,
): Promise<HubFileInfo> {
  let url = resolveUrl(client, repo, revision, file);
  let res: Response | undefined;
  for (let hops = 0; hops < 5; hops++) {
    try {
      res = await client.fetch(url, {
        method: "HEAD",
        headers: { ...authHeaders(client), "accept-encoding": "identity" },
        redirect: "manual",
      });
    } catch (err) {
      throw new Error(
        `cannot reach ${client.endpoint} (${(err as Error).message}${(err as Error).cause ? `: ${String((err as Error).cause)}` : ""}); HF_ENDPOINT sets another hub or mirror`,
      );
    }
    const location = res.headers.get("location");
    // A relative Location is the hub itself (a renamed repo); an absolute one is the storage
    // server, whose answer is not needed: the redirect already carries the hub's headers.
    if (res.status >= 300 && res.status < 400 && location?.startsWith("/")) {
      url = new URL(location, url).toString();
      continue;
    }
    break;
  }
  if (!res || res.status >= 400)
    throw explain(
      repo,
      file,
      revision,
      res?.status ?? 0,
      res?.headers ?? new Headers(),
      client.token !== undefined,
    );
  const commit = res.headers.get("x-repo-commit") ?? revision;
  const etag = normalizeEtag(res.headers.get("x-linked-etag") ?? res.headers.get("etag"));
  const size = Number(res.headers.get("x-linked-size") ?? res.headers.get("content-length"));
  if (!Number.isSafeInteger(size) || size < 0) throw new Error(`hf:${repo}/${file}: the hub gave no size`);
  const expected: Expected = { size };
  if (etag && /^[0-9a-f]{64}$/i.test(etag)) expected.sha256 = etag.toLowerCase();
  else if (etag && /^[0-9a-f]{40}$/i.test(etag)) expected.gitSha1 = etag.toLowerCase();
  else
    throw new Error(
      `hf:${repo}/${file}: the hub gave no content digest (ETag "${etag ?? ""}"), so it cannot be verified`,
    );
  return { commit, size, expected };
}

export interface HubDownload {
  path: string;
  commit: string;
  /** SHA-256 when the hub published one (LFS files). */
  sha256?: string;
  size: number;
}

/**
 * Download one file into `<cacheDir>/<org>--<repo>/<commit>/<file>` (reused when already there),
 * resuming a partial one. `revision` may be a branch, tag or commit.
 */
export async function hubDownload(
  client: HubClient,
  repo: string,
  revision: string,
  file: string,
  cacheDir: string,
): Promise<HubDownload> {
  const info = await hubFileInfo(client, repo, revision, file);
  const dir = join(cacheDir, repo.replace("/", "--"), info.commit);
  const dest = join(dir, file);
  await mkdir(join(dest, ".."), { recursive: true });
  const result = { path: dest, commit: info.commit, sha256: info.expected.sha256, size: info.size };
  const have = await stat(dest).catch(() => undefined);
  // A file under its commit's name was verified when it arrived; the size guards against tampering by truncation.
  if (have?.size === info.size) return result;
  try {
    await downloadResumable({
      url: resolveUrl(client, repo, info.commit, file),
      headers: authHeaders(client),
      dest,
      expected: info.expected,
      title: `Downloading ${file}`,
      progressStream: client.progressStream,
      fetch: client.fetch,
    });
  } catch (err) {
    if (err instanceof HttpStatusError)
      throw explain(repo, file, info.commit, err.status, err.headers, client.token !== undefined);
    throw err;
  }
  return result;
}

/** hubDownload, or undefined when the hub has no such file at that revision (a 404). */
export async function hubDownloadIfPresent(
  client: HubClient,
  repo: string,
  revision: string,
  file: string,
  cacheDir: string,
): Promise<HubDownload | undefined> {
  try {
    return await hubDownload(client, repo, revision, file, cacheDir);
  } catch (err) {
    if (err instanceof HubError && err.status === 404) return undefined;
    throw err;
  }
}
