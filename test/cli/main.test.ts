import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../src/util/paths.ts";

// The repo's own Node 24 (from `npm ci`) runs the .ts entry point, whatever `node` is on PATH.
const node = join(repoRoot, "node_modules", ".bin", "node");
const cli = (...args: string[]) =>
  spawnSync(node, [join(repoRoot, "src/cli/main.ts"), ...args], { encoding: "utf8", timeout: 30_000 });

const COMMANDS = ["setup", "pull", "models", "rm", "convert", "serve", "chat", "checkpoint", "keys", "usage"];

describe("ortserve CLI", () => {
  it("lists the commands on --help", () => {
    const r = cli("--help");
    expect(r.status).toBe(0);
    for (const name of COMMANDS) expect(r.stdout).toMatch(new RegExp(`^  ${name} `, "m"));
  });

  it.each(COMMANDS)("prints %s --help without doing any work", (name) => {
    const r = cli(name, "--help");
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^Usage: ortserve ${name}`));
    expect(r.stderr).toBe("");
  });

  it("exits 2 on an unknown command, a missing command or a bad option", () => {
    expect(cli("frobnicate").status).toBe(2);
    expect(cli().status).toBe(2);
    const bad = cli("setup", "--format", "int3");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("--format must be one of q4, fp32");
    const dtype = cli("serve", "--no-setup", "--kv-cache-dtype", "fp8");
    expect(dtype.status).toBe(2);
    expect(dtype.stderr).toContain("--kv-cache-dtype must be one of auto, float32, float16, int8");
    const retention = cli("serve", "--no-setup", "--response-retention-days", "1.5");
    expect(retention.status).toBe(2);
    expect(retention.stderr).toContain("--response-retention-days must be a non-negative integer");
    const unknown = cli("setup", "--nope");
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("--nope");
  });

  it("checks convert's arguments before loading anything", () => {
    const r = cli("convert", "/no/such/file.gguf", "/tmp/out");
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("not a file");
    // llama.cpp's Q8_K activations are a q4 setting: asked of fp32, a usage error names it.
    const fp32 = cli("convert", "/no/such/file.gguf", "/tmp/out", "--format", "fp32", "--q8k-activations");
    expect(fp32.status).toBe(2);
    expect(fp32.stderr).toContain("--q8k-activations is for --format q4");
  });
});
