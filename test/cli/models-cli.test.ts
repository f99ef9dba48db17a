/**
 * The model commands as a user runs them: `pull` a GGUF on disk (and `setup --model` the same
 * way), `models` lists it with size, architecture, quant mix and formats, `rm` removes it.
 */
import { execFile, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeModel } from "../../src/cli/commands/rm.ts";
import { listInstalled } from "../../src/models/installed.ts";
import { repoRoot } from "../../src/util/paths.ts";
import { startFakeHub } from "../fetch/hub-server.ts";
import { writeSyntheticGguf } from "../fixtures/synthetic-model.ts";

const node = join(repoRoot, "node_modules", ".bin", "node");
let root: string;
let models: string;
let gguf: string;
const cli = (...args: string[]) =>
  spawnSync(node, [join(repoRoot, "src/cli/main.ts"), ...args], {
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, ORTSERVE_CACHE_DIR: join(root, "cache") },
  });

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "ortserve-models-cli-"));
  models = join(root, "models");
  gguf = writeSyntheticGguf(join(root, "Tiny-Chat.gguf"));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("pull, models, rm", () => {
  it("pulls, lists and removes a model", () => {
    const pulled = cli("pull", gguf, "--format", "fp32", "--models-dir", models);
    expect(pulled.stderr).toContain("tiny-chat is ready");
    expect(pulled.status).toBe(0);
    const viaSetup = cli("setup", "--model", gguf, "--name-is-not-an-option", "--models-dir", models);
    expect(viaSetup.status).toBe(2);
    expect(cli("setup", "--model", gguf, "--format", "fp32", "--models-dir", models).stderr).toContain(
      "tiny-chat is installed",
    );

    const table = cli("models", "--models-dir", models);
    expect(table.status).toBe(0);
    const [header, row] = table.stdout.trimEnd().split("\n");
    expect(header!.split(/\s{2,}/)).toEqual(["NAME", "SIZE", "ARCHITECTURE", "QUANT MIX", "FORMATS"]);
    expect(row!.split(/\s{2,}/)).toEqual([
      "tiny-chat",
      expect.stringMatching(/^\d+\.\d KiB$/),
      "llama",
      "Q4_0 7, Q4_1 7, F32 5, Q8_0 1",
      "fp32",
    ]);
    const json = JSON.parse(cli("models", "--json", "--models-dir", models).stdout);
    expect(json).toMatchObject([{ id: "tiny-chat", architecture: "llama", formats: ["fp32"] }]);
    expect(json[0].bytes).toBeGreaterThan(0);

    const missing = cli("rm", "other", "--models-dir", models);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('no model "other"');
    const removed = cli("rm", "tiny-chat", "--models-dir", models);
    expect(removed.status).toBe(0);
    expect(existsSync(join(models, "tiny-chat"))).toBe(false);
    expect(cli("models", "--models-dir", models).stderr).toContain("no models in");
    // The download cache is not the models directory: the source file is untouched.
    expect(existsSync(gguf)).toBe(true);
  });

  it("pulls from the hub named by HF_ENDPOINT with HF_TOKEN, progress on stderr only", async () => {
    const commit = "a".repeat(40);
    const hub = await startFakeHub({
      "org/tiny": {
        commit,
        token: "hf_cli",
        files: { "Tiny-Q.gguf": { data: readFileSync(gguf), lfs: true } },
      },
    });
    try {
      // Asynchronous, so this process's event loop keeps answering for the fake hub.
      const run = (env: Record<string, string>) =>
        new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
          execFile(
            node,
            [
              join(repoRoot, "src/cli/main.ts"),
              "pull",
              "hf:org/tiny/Tiny-Q.gguf",
              "--format",
              "fp32",
              "--models-dir",
              models,
            ],
            {
              env: { ...process.env, ORTSERVE_CACHE_DIR: join(root, "cache"), HF_ENDPOINT: hub.url, ...env },
              timeout: 120_000,
            },
            (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
          );
        });
      const denied = await run({ HF_TOKEN: "", HUGGING_FACE_HUB_TOKEN: "" });
      expect(denied.code).toBe(1);
      expect(denied.stderr).toContain("set HF_TOKEN");
      const ok = await run({ HF_TOKEN: "hf_cli" });
      expect(ok.stderr).toContain("Downloading Tiny-Q.gguf");
      expect(ok.stderr).toContain("tiny-q is ready");
      expect(ok.code).toBe(0);
      expect(ok.stdout).toBe("");
      expect(existsSync(join(models, "tiny-q", "onnx", "model.onnx"))).toBe(true);
    } finally {
      await hub.close();
    }
  });

  it("keeps the committed manifest of the default model when removing its converted files", async () => {
    const dir = join(root, "rm-default");
    const pulled = cli("pull", gguf, "--name", "default-like", "--format", "fp32", "--models-dir", dir);
    expect(pulled.status).toBe(0);
    const modelDir = join(dir, "default-like");
    const manifest = readFileSync(join(modelDir, "ortserve.json"), "utf8");
    const removed = await removeModel("default-like", dir, modelDir);
    expect(removed.keptManifest).toBe(join(modelDir, "ortserve.json"));
    expect(readdirSync(modelDir)).toEqual(["ortserve.json"]);
    expect(readFileSync(join(modelDir, "ortserve.json"), "utf8")).toBe(manifest);
    expect(listInstalled(dir)).toMatchObject([
      { id: "default-like", formats: [], problem: expect.stringMatching(/not converted/) },
    ]);
  });
});
