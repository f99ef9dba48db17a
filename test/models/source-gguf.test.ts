/** Finding an installed model's source GGUF for the scripts that compare with llama.cpp. */
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { writeStamp } from "../../src/models/convert/conversion-stamp.ts";
import { recordedGgufPath, sourceGguf } from "../../src/models/source-gguf.ts";

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

function modelDir(source: Record<string, unknown>): { root: string; dir: string } {
  const root = mkdtempSync(join(tmpdir(), "ortserve-source-gguf-"));
  roots.push(root);
  const dir = join(root, "models", "m");
  mkdirSync(join(dir, "onnx"), { recursive: true });
  writeFileSync(join(dir, "ortserve.json"), JSON.stringify({ id: "m", source }));
  return { root, dir };
}

const stamp = (sha: string) => ({
  gguf_sha256: sha,
  converter_version: "6",
  formats: ["q4" as const],
  files: [],
  converted_at: new Date().toISOString(),
});

describe("an installed model's source GGUF", () => {
  it("is found where each kind of source leaves it", () => {
    const env = { ORTSERVE_CACHE_DIR: "/cache" };
    const at = (source: Record<string, unknown>) => recordedGgufPath(modelDir(source).dir, env);
    expect(at({ kind: "catalogue", gguf_file: "a.gguf" })).toBe("/cache/gguf/a.gguf");
    expect(at({ kind: "pypi-wheel", gguf_file: "b.gguf" })).toBe("/cache/gguf/b.gguf");
    expect(at({ kind: "hf", repo: "org/r", file: "x/c.gguf", commit: "abc" })).toBe(
      "/cache/hf/org--r/abc/x/c.gguf",
    );
    expect(at({ kind: "file", path: "/data/d.gguf" })).toBe("/data/d.gguf");
    expect(at({ kind: "dir", path: "/data/st" })).toBeUndefined();
  });

  it("is returned only when its SHA-256 is the one the conversion recorded", async () => {
    const bytes = Buffer.from("GGUF not really");
    const sha = createHash("sha256").update(bytes).digest("hex");
    const { root, dir } = modelDir({ kind: "file", path: "" });
    const file = join(root, "src.gguf");
    writeFileSync(
      join(dir, "ortserve.json"),
      JSON.stringify({ id: "m", source: { kind: "file", path: file } }),
    );
    await expect(sourceGguf(dir, root)).rejects.toThrow(/no conversion stamp/);
    await writeStamp(dir, stamp(sha));
    await expect(sourceGguf(dir, join(root, "empty"))).rejects.toThrow(/no such file in .*--gguf/);
    writeFileSync(file, bytes);
    expect(await sourceGguf(dir, join(root, "empty"))).toBe(file);
    writeFileSync(file, "another file");
    await expect(sourceGguf(dir, join(root, "empty"))).rejects.toThrow(/is not the file/);
  });
});
