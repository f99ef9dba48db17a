/**
 * The npm package: what `npm pack` publishes (the build's JavaScript and declarations, the
 * native sources the install script compiles, the shipped model manifests — never tests, sources,
 * weights or caches), that the built bin and the `exports` entry work, the Node versions it
 * declares, and the tarball as a user installs it: into an empty folder, from the npm registry,
 * then `ortserve serve` there answering the official client.
 */
import { execFileSync } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nodeSupported, SUPPORTED_NODE } from "../../src/cli/node-version.ts";
import { repoRoot } from "../../src/util/paths.ts";
import {
  DEFAULT_MODEL,
  defaultModelDir,
  haveDefaultModel,
  type ServerProcess,
  startServerProcess,
} from "../e2e/server-process.ts";

interface PackFile {
  path: string;
}

const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
  bin: Record<string, string>;
  exports: Record<string, { types: string; default: string } | string>;
  types: string;
  engines: { node: string };
  private?: boolean;
};

/** npm and the scripts it runs use this Node (the test's), whatever `node` the PATH had first. */
const nodeFirstEnv = { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH}` };

// One real pack for every check here; prepack builds dist/ first, so this also proves `npm run build` works.
const packDir = mkdtempSync(join(tmpdir(), "ortserve-pack-"));
const packed = (
  JSON.parse(
    execFileSync("npm", ["pack", "--json", "--pack-destination", packDir], {
      cwd: repoRoot,
      encoding: "utf8",
      env: nodeFirstEnv,
      stdio: ["ignore", "pipe", "ignore"],
    }),
  ) as { filename: string; files: PackFile[] }[]
)[0]!;
const tarball = join(packDir, packed.filename);
afterAll(() => rmSync(packDir, { recursive: true, force: true }));

describe("npm pack", () => {
  const files = packed.files.map((f) => f.path);

  it("holds the built JavaScript with its declarations, the bin and the exports targets", () => {
    const js = files.filter((f) => f.startsWith("dist/") && f.endsWith(".js"));
    expect(js.length).toBeGreaterThan(50);
    for (const f of js) expect(files).toContain(f.replace(/\.js$/, ".d.ts"));
    const entry = pkg.exports["."] as { types: string; default: string };
    for (const target of [
      pkg.bin.ortserve!,
      "dist/cli/main.js",
      entry.default,
      entry.types,
      pkg.types,
      "dist/workers/worker.js",
    ])
      expect(files).toContain(target.replace(/^\.\//, ""));
    expect(files).toContain("native/binding.gyp");
    expect(files).toContain("models/smollm2-135m-instruct/ortserve.json");
  });

  it("leaves out tests, TypeScript sources, weights and caches", () => {
    const unwanted = files.filter(
      (f) =>
        /^(test|bench|src|docs|\.cache|node_modules|native\/build)\//.test(f) ||
        /^models\/.*\/onnx\//.test(f) ||
        /\.(onnx|gguf|safetensors|bin|node|db|log)$/.test(f) ||
        (f.endsWith(".ts") && !f.endsWith(".d.ts")),
    );
    expect(unwanted).toEqual([]);
    // Generated model files (config, tokenizer) stay out; only the committed manifests ship.
    expect(files.filter((f) => f.startsWith("models/") && !/ortserve\.json$|README\.md$/.test(f))).toEqual(
      [],
    );
  });

  it("the built bin runs, and the package name imports the built Engine", () => {
    const help = execFileSync(process.execPath, [join(repoRoot, pkg.bin.ortserve!), "--help"], {
      encoding: "utf8",
    });
    expect(help).toMatch(/^Usage: ortserve <command>/);
    expect(readFileSync(join(repoRoot, pkg.bin.ortserve!), "utf8")).toMatch(/^#!\/usr\/bin\/env node\n/);
    // A package can import itself by name through its `exports` (Node's self-reference).
    const probe = `import("ortserve").then((m) => console.log(typeof m.Engine.open, typeof m.startServer))`;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", probe], {
      cwd: repoRoot,
      encoding: "utf8",
    });
    expect(out.trim()).toBe("function function");
  });
});

describe("the Node versions", () => {
  it("package.json declares the range the CLI checks, and the package is publishable", () => {
    expect(pkg.engines.node).toBe(SUPPORTED_NODE);
    expect(pkg.private).toBeUndefined();
    expect(nodeSupported(process.versions.node)).toBe(true);
    for (const v of ["22.16.0", "22.20.1", "24.0.0", "25.1.0"]) expect(nodeSupported(v)).toBe(true);
    for (const v of ["20.19.0", "22.15.1", "23.11.0"]) expect(nodeSupported(v)).toBe(false);
  });
});

describe.skipIf(!haveDefaultModel)("the tarball installed into an empty folder", () => {
  const KEY = "sk-ortserve-installed-package";
  let dir: string;
  let server: ServerProcess | undefined;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "ortserve-install-"));
    // As the repository's .npmrc: onnxruntime-node's CUDA download host may be unreachable.
    writeFileSync(join(dir, ".npmrc"), "onnxruntime-node-install=skip\nfund=false\naudit=false\n");
    writeFileSync(join(dir, "package.json"), `${JSON.stringify({ name: "uses-ortserve", private: true })}\n`);
    execFileSync("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball], {
      cwd: dir,
      env: nodeFirstEnv,
      stdio: "ignore",
    });
    // The default model as `ortserve setup` converts it, in a models folder of the user's.
    mkdirSync(join(dir, "models"));
    symlinkSync(defaultModelDir, join(dir, "models", DEFAULT_MODEL), "dir");
  }, 600_000);

  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("installs the `ortserve` command from the package, not from this checkout", () => {
    const bin = realpathSync(join(dir, "node_modules", ".bin", "ortserve"));
    expect(bin).toBe(join(realpathSync(dir), "node_modules", "ortserve", pkg.bin.ortserve!));
  });

  it("`ortserve serve` answers /health and a chat completion", async () => {
    server = await startServerProcess({
      command: [join(dir, "node_modules", ".bin", "ortserve")],
      cwd: dir,
      env: nodeFirstEnv,
      modelsDir: join(dir, "models"),
      dbPath: join(dir, "ortserve.db"),
      apiKey: KEY,
    });
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(200);
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
    const chat = await client.chat.completions.create({
      model: DEFAULT_MODEL,
      messages: [{ role: "user", content: "What is the capital of France?" }],
      max_tokens: 8,
      temperature: 0,
    });
    expect(chat.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(chat.usage!.completion_tokens).toBeGreaterThan(0);
    // What the install script built (or left to the TypeScript and onnxruntime-node fallbacks)
    // loads: a native build that does not load is a warning.
    expect(server.stderr()).not.toMatch(/failed to load|cannot load/);
  }, 120_000);
});
