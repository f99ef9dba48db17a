/**
 * The AVX-512 VNNI projection kernel on any x86-64 CPU: native/test/kernel-parity.cc builds the
 * kernel's code over portable stand-ins for its intrinsics (native/test/avx512-emulation.h) and
 * holds it to the portable loop, bit for bit, for every kind of packed weight and 1 to 16 rows,
 * and for a stack of parts packed each in its own form.
 * A CPU with AVX-512 VNNI runs the real instructions in quant-matmul-op.test.ts as well; this
 * keeps a change to that kernel checked where CI has only AVX2.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../src/util/paths.ts";

const compiler = spawnSync("g++", ["--version"]).status === 0;

describe.skipIf(process.arch !== "x64" || !compiler)("AVX-512 VNNI projection kernel, emulated", () => {
  it("gives the portable loop's floats for every kind of weight", () => {
    const dir = mkdtempSync(join(tmpdir(), "ortserve-kernel-parity-"));
    try {
      const binary = join(dir, "kernel-parity");
      const native = join(repoRoot, "native");
      // -O0: the kernel's templates take minutes to optimise and seconds to run unoptimised.
      const build = spawnSync(
        "g++",
        [
          "-std=gnu++17",
          "-O0",
          "-ffp-contract=off",
          "-Wno-psabi",
          "-DORTSERVE_EMULATE_AVX512",
          join(native, "test/kernel-parity.cc"),
          join(native, "src/block-quant-matmul.cc"),
          join(native, "src/weight-arena.cc"),
          join(native, "src/projection-epilogue.cc"),
          "-o",
          binary,
        ],
        { encoding: "utf8" },
      );
      expect(build.status, build.stderr).toBe(0);
      const run = spawnSync(binary, [], { encoding: "utf8" });
      expect(run.stdout).not.toContain("FAIL");
      expect(run.status, run.stdout).toBe(0);
      // Every kind of weight for each form of quants; 2-bit ones have 4-bit scale codes as well,
      // 3- to 5-bit ones 6-bit codes.
      const forms = {
        "2-bit": 1044,
        "3-bit": 1044,
        "4-bit": 1044,
        "5-bit, zero point 16": 1044,
        "5-bit (Q5_1": 1044,
      };
      for (const [form, cases] of Object.entries({ ...forms, "6-bit": 756, "8-bit": 756 }))
        expect(run.stdout).toMatch(
          new RegExp(`^ok ${form.replace(/[()]/g, "\\$&")}.*: ${cases} cases$`, "m"),
        );
      // A stack of three parts' forms, packed as three parts.
      expect(run.stdout).toMatch(/^ok a stack of three forms: 72 cases$/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});
