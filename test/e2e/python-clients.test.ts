/**
 * The official Python clients, unmodified, against a real server (test/e2e/python-clients.sh):
 * `openai`'s Responses API, `anthropic`'s Messages API and an OpenAI Agents SDK agent with one
 * function tool run to completion. Needs python3 (the script installs the packages from PyPI into
 * .cache on first use) and the default model.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../src/util/paths.ts";
import { haveDefaultModel } from "./server-process.ts";

const hasPython = spawnSync("python3", ["-c", "import venv"]).status === 0;

const CHECKS = [
  "responses.create",
  "responses.stream",
  "responses function tool round trip",
  "responses text.format json_schema",
  "responses previous_response_id, retrieve, delete",
  "messages.create",
  "messages.stream",
  "messages tool_use round trip",
  "messages.count_tokens",
  "agents run to completion",
];

describe.skipIf(!hasPython || !haveDefaultModel)("the official Python clients", () => {
  it("openai responses, anthropic messages and an Agents SDK run all pass", () => {
    const run = spawnSync("bash", [join(repoRoot, "test/e2e/python-clients.sh")], {
      cwd: repoRoot,
      encoding: "utf8",
      timeout: 600_000,
    });
    const out = `${run.stdout}\n${run.stderr}`;
    const passed = [...run.stdout.matchAll(/^python-clients: (.+) ok$/gm)].map((m) => m[1]!);
    for (const check of CHECKS)
      expect(
        passed.some((p) => p.startsWith(check)),
        `${check}\n${out.slice(-4000)}`,
      ).toBe(true);
    expect(run.status, out.slice(-4000)).toBe(0);
  }, 620_000);
});
