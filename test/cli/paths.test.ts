import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { cacheDir, ggufCacheDir, modelsDir, repoRoot } from "../../src/util/paths.ts";

describe("paths", () => {
  it("finds the repository root from the source tree", () => {
    expect(existsSync(join(repoRoot, "package.json"))).toBe(true);
  });

  it("defaults the cache and models dirs into the repo", () => {
    expect(cacheDir({})).toBe(join(repoRoot, ".cache"));
    expect(ggufCacheDir({})).toBe(join(repoRoot, ".cache", "gguf"));
    expect(modelsDir(undefined, {})).toBe(join(repoRoot, "models"));
  });

  it("honours environment overrides, resolved to absolute paths", () => {
    expect(cacheDir({ ORTSERVE_CACHE_DIR: "/var/cache/ortserve" })).toBe("/var/cache/ortserve");
    expect(ggufCacheDir({ ORTSERVE_CACHE_DIR: "rel" })).toBe(resolve("rel", "gguf"));
    expect(modelsDir(undefined, { ORTSERVE_MODELS_DIR: "/srv/models" })).toBe("/srv/models");
  });

  it("prefers --models-dir over the environment", () => {
    expect(modelsDir("/opt/m", { ORTSERVE_MODELS_DIR: "/srv/models" })).toBe("/opt/m");
  });
});
