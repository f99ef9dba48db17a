/**
 * The short schemathesis run (test/fuzz/schemathesis.sh) as part of the suite: generated requests
 * for every operation of /openapi.json with every check: none answered with a 5xx or outside the
 * documented schema, every schema-valid request accepted and every invalid one refused.
 * Needs python3 (the script installs schemathesis from PyPI into .cache on first use).
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../src/util/paths.ts";

const hasPython = spawnSync("python3", ["-c", "import venv"]).status === 0;

describe.skipIf(!hasPython)("schemathesis (short run)", () => {
  it("generates hundreds of cases with no 5xx and no schema violations", () => {
    const run = spawnSync("bash", [join(repoRoot, "test/fuzz/schemathesis.sh")], {
      cwd: repoRoot,
      encoding: "utf8",
      timeout: 300_000,
    });
    const out = `${run.stdout}\n${run.stderr}`;
    const summary = /schemathesis: (\d+) cases, (\d+) responses >= 500, (\d+) failed checks/.exec(out);
    expect(summary, out.slice(-4000)).not.toBeNull();
    const [cases, serverErrors, failedChecks] = summary!.slice(1).map(Number);
    expect(cases).toBeGreaterThanOrEqual(300);
    expect({ serverErrors, failedChecks }, out.slice(-4000)).toEqual({ serverErrors: 0, failedChecks: 0 });
    // A non-zero exit with no failed check is schemathesis' own error; its report says which.
    // Debt: hypothesis (under schemathesis' coverage phase) sometimes crashes describing a lambda
    // on CPython 3.11 ("AST constructor recursion depth mismatch"): a crash of the generator, not
    // an answer of the server, so that one error alone is let through; any other fails the test.
    const generatorCrash = /SystemError: AST constructor recursion depth mismatch/.test(out);
    const otherErrors = /Errors:\n(?:.*\n)*?\s*🚫 (?!Runtime Error: 1\n)/.test(out);
    if (run.status !== 0)
      expect({ generatorCrash, otherErrors }, out.slice(-4000)).toEqual({
        generatorCrash: true,
        otherErrors: false,
      });
  }, 320_000);
});
