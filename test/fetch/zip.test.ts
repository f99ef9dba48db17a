import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { extractZipEntry, findZipEntry, readZipDirectory, ZipError } from "../../src/models/fetch/zip.ts";
import { buildZip } from "./zip-fixture.ts";

const dir = mkdtempSync(join(tmpdir(), "ortserve-zip-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function writeZip(name: string, zip: Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, zip);
  return path;
}

function collector(): { sink: Writable; bytes: () => Buffer } {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk);
      done();
    },
  });
  return { sink, bytes: () => Buffer.concat(chunks) };
}

// Compressible text plus incompressible noise, large enough to span several stream chunks.
const text = Buffer.from("GGUF says hello. ".repeat(20_000));
const noise = randomBytes(300_000);

describe("zip reader", () => {
  const path = writeZip(
    "mixed.zip",
    buildZip(
      [
        { name: "pkg/stored.bin", data: noise, method: 0 },
        { name: "pkg/deflated.txt", data: text, method: 8 },
        { name: "pkg/empty", data: Buffer.alloc(0), method: 0 },
      ],
      "a trailing archive comment",
    ),
  );

  it("lists members from the central directory", async () => {
    const entries = await readZipDirectory(path);
    expect(entries.map((e) => [e.name, e.method, e.uncompressedSize])).toEqual([
      ["pkg/stored.bin", 0, noise.length],
      ["pkg/deflated.txt", 8, text.length],
      ["pkg/empty", 0, 0],
    ]);
  });

  it("extracts stored, deflated and empty members byte for byte", async () => {
    const entries = await readZipDirectory(path);
    for (const [name, expected] of [
      ["pkg/stored.bin", noise],
      ["pkg/deflated.txt", text],
      ["pkg/empty", Buffer.alloc(0)],
    ] as const) {
      const out = collector();
      await extractZipEntry(path, findZipEntry(entries, name), out.sink);
      expect(out.bytes().equals(expected)).toBe(true);
    }
  });

  it("passes data through extra stages before the sink", async () => {
    const entries = await readZipDirectory(path);
    const out = collector();
    let seen = 0;
    const tap = new PassThrough();
    tap.on("data", (c: Buffer) => {
      seen += c.length;
    });
    await extractZipEntry(path, findZipEntry(entries, "pkg/deflated.txt"), out.sink, [tap]);
    expect(seen).toBe(text.length);
  });

  it("rejects a member whose CRC-32 does not match", async () => {
    for (const method of [0, 8] as const) {
      const bad = writeZip(
        `crc-${method}.zip`,
        buildZip([{ name: "x", data: text, method, crcOverride: 0x1234 }]),
      );
      const [entry] = await readZipDirectory(bad);
      await expect(extractZipEntry(bad, entry!, collector().sink)).rejects.toThrow(/CRC-32/);
    }
  });

  it("rejects a member whose recorded size is wrong", async () => {
    const zip = buildZip([{ name: "x", data: noise, method: 0 }]);
    // Shrink the central directory's uncompressed size: the stream then carries more than recorded.
    const cdAt = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
    zip.writeUInt32LE(noise.length - 1, cdAt + 24);
    const bad = writeZip("size.zip", zip);
    const [entry] = await readZipDirectory(bad);
    await expect(extractZipEntry(bad, entry!, collector().sink)).rejects.toThrow(ZipError);
  });

  it("names the missing member and what the archive holds", async () => {
    const entries = await readZipDirectory(path);
    expect(() => findZipEntry(entries, "pkg/model.gguf")).toThrow(
      /pkg\/model\.gguf not found.*pkg\/stored\.bin/,
    );
  });

  it("reads sizes and offsets from a zip64 extra field", async () => {
    const z = writeZip(
      "zip64.zip",
      buildZip([
        { name: "a", data: noise, method: 0 },
        { name: "b", data: text, method: 8, zip64: true },
      ]),
    );
    const entries = await readZipDirectory(z);
    const b = findZipEntry(entries, "b");
    expect(b.uncompressedSize).toBe(text.length);
    expect(b.localHeaderOffset).toBeGreaterThan(noise.length);
    const out = collector();
    await extractZipEntry(z, b, out.sink);
    expect(out.bytes().equals(text)).toBe(true);
  });

  it("refuses a file that is not a zip", async () => {
    const notZip = join(dir, "plain.txt");
    writeFileSync(notZip, "just text");
    await expect(readZipDirectory(notZip)).rejects.toThrow(/not a zip file/);
  });

  // Cross-check the hand-built fixture with an independent reader, so the tests above test the reader.
  const python = spawnSync("python3", ["--version"]).status === 0;
  it.skipIf(!python)("fixture archives pass Python's zipfile integrity test", () => {
    const check = "import sys, zipfile; sys.exit(zipfile.ZipFile(sys.argv[1]).testzip() is not None)";
    expect(spawnSync("python3", ["-c", check, path]).status).toBe(0);
  });
});
