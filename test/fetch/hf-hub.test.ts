/**
 * The hub client against a real local HTTP server with the hub's URL layout and headers
 * (hub-server.ts): files pinned to the commit, LFS SHA-256 and git SHA-1 checked, the token sent
 * to the hub and not to storage, a 401 without it, a wrong hash refused, a cut download resumed
 * with a Range request.
 */
import { randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hubClient, hubDownload, parseHubSpec } from "../../src/models/fetch/hf-hub.ts";
import type { ProgressStream } from "../../src/util/progress.ts";
import { type FakeHub, gitSha1, sha256, startFakeHub } from "./hub-server.ts";

const quiet: ProgressStream = { isTTY: false, write: () => true };
const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const weights = randomBytes(3 * 1024 * 1024 + 17);
const config = Buffer.from('{"model_type": "llama"}\n');
const secret = randomBytes(4096);

let hub: FakeHub;
let root: string;
let n = 0;
const cache = () => join(root, `cache-${n++}`);

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "ortserve-hub-"));
  hub = await startFakeHub({
    "org/open": {
      commit: COMMIT,
      refs: ["main", "v1"],
      files: {
        "model.gguf": { data: weights, lfs: true },
        "config.json": { data: config },
        "sub/dir/x.gguf": { data: weights, lfs: true },
      },
    },
    "org/private": { commit: COMMIT, token: "hf_secret", files: { "m.gguf": { data: secret, lfs: true } } },
  });
});
afterAll(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

const client = (env: Record<string, string> = {}) => ({
  ...hubClient({ HF_ENDPOINT: hub.url, ...env }),
  progressStream: quiet,
});

describe("parseHubSpec", () => {
  it("reads repo, file path and revision", () => {
    expect(parseHubSpec("hf:org/repo/a/b.gguf@v2")).toEqual({
      repo: "org/repo",
      file: "a/b.gguf",
      revision: "v2",
    });
    expect(parseHubSpec("hf:org/repo")).toEqual({ repo: "org/repo", file: undefined, revision: "main" });
  });
  it("refuses what is not a repo", () => {
    expect(() => parseHubSpec("hf:justone")).toThrow(/expected hf:<org>\/<repo>/);
    expect(() => parseHubSpec("hf:org/repo/../x.gguf")).toThrow(/bad file path/);
    expect(() => parseHubSpec("hf:org/repo@")).toThrow(/empty revision/);
  });
});

describe("hubDownload", () => {
  it("fetches an LFS file through the storage redirect, pinned to the commit, SHA-256 checked", async () => {
    const dir = cache();
    const got = await hubDownload(client(), "org/open", "main", "model.gguf", dir);
    expect(got.commit).toBe(COMMIT);
    expect(got.sha256).toBe(sha256(weights));
    expect(got.path).toBe(join(dir, "org--open", COMMIT, "model.gguf"));
    expect(readFileSync(got.path).equals(weights)).toBe(true);
    // The download asked for the commit, not the branch, and its bytes came from storage.
    const gets = hub.requests.filter((r) => r.method === "GET");
    expect(gets.at(-2)?.url).toBe(`/org/open/resolve/${COMMIT}/model.gguf`);
    expect(gets.at(-1)?.url).toBe(`/lfs/${sha256(weights)}`);
    expect(gets.at(-1)?.host).toMatch(/^localhost:/);
  });

  it("checks a git-stored file by its blob SHA-1 and reuses a cached file", async () => {
    const dir = cache();
    const got = await hubDownload(client(), "org/open", "v1", "config.json", dir);
    expect(readFileSync(got.path).equals(config)).toBe(true);
    expect(got.sha256).toBeUndefined();
    expect(gitSha1(config)).toMatch(/^[0-9a-f]{40}$/);
    const before = hub.requests.filter((r) => r.method === "GET").length;
    await hubDownload(client(), "org/open", "v1", "config.json", dir);
    expect(hub.requests.filter((r) => r.method === "GET").length).toBe(before);
  });

  it("keeps a file's folder inside the repo", async () => {
    const got = await hubDownload(client(), "org/open", "main", "sub/dir/x.gguf", cache());
    expect(got.path.endsWith(join(COMMIT, "sub", "dir", "x.gguf"))).toBe(true);
  });

  it("answers 401 without a token with a message naming HF_TOKEN, and works with it", async () => {
    await expect(hubDownload(client(), "org/private", "main", "m.gguf", cache())).rejects.toThrow(
      /set HF_TOKEN/,
    );
    await expect(
      hubDownload(client({ HF_TOKEN: "wrong" }), "org/private", "main", "m.gguf", cache()),
    ).rejects.toThrow(/refused HF_TOKEN/);
    const got = await hubDownload(
      client({ HF_TOKEN: "hf_secret" }),
      "org/private",
      "main",
      "m.gguf",
      cache(),
    );
    expect(readFileSync(got.path).equals(secret)).toBe(true);
    const last = hub.requests.filter((r) => r.url.includes("m.gguf") || r.url.startsWith("/lfs/")).slice(-3);
    expect(
      last.map((r) => [r.method, r.url.startsWith("/lfs/") ? "storage" : "hub", r.authorization]),
    ).toEqual([
      ["HEAD", "hub", "Bearer hf_secret"],
      ["GET", "hub", "Bearer hf_secret"],
      // The token goes to the hub only; the cross-origin redirect drops it.
      ["GET", "storage", undefined],
    ]);
  });

  it("names a missing file, revision or repository", async () => {
    await expect(hubDownload(client(), "org/open", "main", "nope.gguf", cache())).rejects.toThrow(
      /nope.gguf not found/,
    );
    await expect(hubDownload(client(), "org/open", "v9", "model.gguf", cache())).rejects.toThrow(
      /no revision "v9"/,
    );
    await expect(hubDownload(client(), "org/none", "main", "model.gguf", cache())).rejects.toThrow(/401/);
  });

  it("refuses content whose SHA-256 is not the hub's, and keeps nothing of it", async () => {
    const data = randomBytes(100_000);
    const evil = Buffer.from(data);
    evil[5000] ^= 0xff;
    const local = await startFakeHub({
      "org/t": { commit: COMMIT, files: { "t.gguf": { data, lfs: true } } },
    });
    try {
      local.tampered.set(sha256(data), evil);
      const dir = cache();
      const c = { ...hubClient({ HF_ENDPOINT: local.url }), progressStream: quiet };
      await expect(hubDownload(c, "org/t", "main", "t.gguf", dir)).rejects.toThrow(/SHA-256 mismatch/);
      expect(readdirSync(join(dir, "org--t", COMMIT))).toEqual([]);
    } finally {
      await local.close();
    }
  });

  it("resumes a cut download with a Range request and verifies the whole", async () => {
    const dir = cache();
    const cut = 1024 * 1024 + 3;
    hub.cutOnce.set(sha256(weights), cut);
    await expect(hubDownload(client(), "org/open", "main", "model.gguf", dir)).rejects.toThrow(/interrupted/);
    const partial = join(dir, "org--open", COMMIT, "model.gguf.partial");
    expect(existsSync(partial)).toBe(true);
    const kept = readFileSync(partial).length;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(weights.length);

    const got = await hubDownload(client(), "org/open", "main", "model.gguf", dir);
    expect(readFileSync(got.path).equals(weights)).toBe(true);
    expect(existsSync(partial)).toBe(false);
    const resumed = hub.requests.filter((r) => r.url.startsWith("/lfs/") && r.method === "GET").at(-1);
    expect(resumed?.range).toBe(`bytes=${kept}-`);
  });

  it("starts over when the server ignores the Range request (200 instead of 206)", async () => {
    const dir = cache();
    hub.cutOnce.set(sha256(weights), 500_000);
    await expect(hubDownload(client(), "org/open", "main", "model.gguf", dir)).rejects.toThrow(/interrupted/);
    const kept = readFileSync(join(dir, "org--open", COMMIT, "model.gguf.partial")).length;
    expect(kept).toBeGreaterThan(0);
    hub.ignoreRange = true;
    try {
      const got = await hubDownload(client(), "org/open", "main", "model.gguf", dir);
      expect(readFileSync(got.path).equals(weights)).toBe(true);
      expect(hub.requests.filter((r) => r.url.startsWith("/lfs/")).at(-1)?.range).toBe(`bytes=${kept}-`);
    } finally {
      hub.ignoreRange = false;
    }
  });

  it("finishes a download whose bytes all arrived without asking for more", async () => {
    const dir = cache();
    const partial = join(dir, "org--open", COMMIT, "model.gguf.partial");
    mkdirSync(join(partial, ".."), { recursive: true });
    writeFileSync(partial, weights);
    const before = hub.requests.filter((r) => r.method === "GET").length;
    const got = await hubDownload(client(), "org/open", "main", "model.gguf", dir);
    expect(readFileSync(got.path).equals(weights)).toBe(true);
    expect(hub.requests.filter((r) => r.method === "GET").length).toBe(before);
  });

  it("refuses a git-stored file whose blob SHA-1 is not the ETag", async () => {
    const evil = Buffer.from(config);
    evil[2] ^= 0x20;
    hub.tampered.set(gitSha1(config), evil);
    try {
      await expect(hubDownload(client(), "org/open", "main", "config.json", cache())).rejects.toThrow(
        /git blob SHA-1 mismatch/,
      );
    } finally {
      hub.tampered.delete(gitSha1(config));
    }
  });
});
