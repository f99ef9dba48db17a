/**
 * The built-in catalogue is consistent: the default model's entry is the committed manifest's
 * source, parts add up to the GGUF, wheel names follow the packages. Where this machine holds a
 * catalogue model's wheels (~/.cache/ortserve/pypi), they assemble to the pinned SHA-256.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ensureAssembledGguf } from "../../src/models/fetch/assemble-parts.ts";
import { CATALOGUE, catalogueEntry } from "../../src/models/fetch/catalogue.ts";
import { readModelMeta } from "../../src/models/fetch/model-meta.ts";
import { committedModelsDir } from "../../src/util/paths.ts";
import type { ProgressStream } from "../../src/util/progress.ts";

const quiet: ProgressStream = { isTTY: false, write: () => true };

describe("catalogue", () => {
  it("pins the default model exactly as its committed manifest does", async () => {
    const meta = await readModelMeta(join(committedModelsDir, "smollm2-135m-instruct"));
    const entry = catalogueEntry(meta.id)!;
    expect(entry.parts).toEqual([
      {
        package: meta.source.package,
        version: meta.source.version,
        wheel: meta.source.wheel,
        wheel_sha256: meta.source.wheel_sha256,
        member: meta.source.member,
        size: meta.source.gguf_size,
      },
    ]);
    expect([entry.gguf_file, entry.gguf_size, entry.gguf_sha256]).toEqual([
      meta.source.gguf_file,
      meta.source.gguf_size,
      meta.source.gguf_sha256,
    ]);
  });

  it.each(CATALOGUE.map((e) => [e.id, e] as const))(
    "%s: parts add up and are named by their packages",
    (_, entry) => {
      expect(entry.parts.reduce((a, p) => a + p.size, 0)).toBe(entry.gguf_size);
      expect(entry.gguf_sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(entry.license).not.toBe("");
      for (const p of entry.parts) {
        expect(p.wheel).toBe(`${p.package.replace(/-/g, "_")}-${p.version}-py3-none-any.whl`);
        expect(p.wheel_sha256).toMatch(/^[0-9a-f]{64}$/);
      }
      expect(new Set(entry.parts.map((p) => p.package)).size).toBe(entry.parts.length);
    },
  );

  it("names Gemma's terms as its license", () => {
    expect(catalogueEntry("gemma-3-270m")?.license).toMatch(/Gemma/);
  });

  const gemmaWheels = join(homedir(), ".cache", "ortserve", "pypi", "gemma3-270m");
  const gemma = catalogueEntry("gemma-3-270m")!;
  const present = gemma.parts.every((p) => existsSync(join(gemmaWheels, p.wheel)));
  const root = mkdtempSync(join(tmpdir(), "ortserve-catalogue-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it.skipIf(!present)("assembles Gemma 3 270M from its real wheels to the pinned SHA-256", async () => {
    const got = await ensureAssembledGguf(gemma, {
      ggufDir: join(root, "gguf"),
      wheelDir: join(root, "wheels"),
      wheelSearchDirs: [gemmaWheels],
      downloadPart: async () => {
        throw new Error("every wheel is on disk; nothing should be downloaded");
      },
      log: () => {},
      progressStream: quiet,
    });
    expect(got.action).toBe("assembled");
    // Assembly throws on a digest mismatch; re-verifying the file proves it once more.
    expect(
      (
        await ensureAssembledGguf(gemma, {
          ggufDir: join(root, "gguf"),
          wheelDir: join(root, "wheels"),
          verify: true,
          progressStream: quiet,
        })
      ).action,
    ).toBe("verified");
  });
});
