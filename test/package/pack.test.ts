/**
 * The npm package: what `npm pack` would publish (the build's JavaScript and declarations, the
 * native sources the install script compiles, the shipped model manifests — never tests, sources,
 * weights or caches), and that the built bin and the `exports` entry work.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../src/util/paths.ts";

interface PackFile {
  path: string;
}

const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
  bin: Record<string, string>;
  exports: Record<string, { types: string; default: string } | string>;
  types: string;
};

describe("npm pack", () => {
  // prepack builds dist/ first, so this also proves `npm run build` works.
  const output = execFileSync("npm", ["pack", "--dry-run", "--json"], {
    cwd: repoRoot,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
  const files = (JSON.parse(output) as { files: PackFile[] }[])[0]!.files.map((f) => f.path);

  it("holds the built JavaScript with its declarations, the bin and the exports targets", () => {
    const js = files.filter((f) => f.startsWith("dist/") && f.endsWith(".js"));
    expect(js.length).toBeGreaterThan(50);
    for (const f of js) expect(files).toContain(f.replace(/\.js$/, ".d.ts"));
    const entry = pkg.exports["."] as { types: string; default: string };
    for (const target of [pkg.bin.ortserve!, entry.default, entry.types, pkg.types, "dist/workers/worker.js"])
      expect(files).toContain(target.replace(/^\.\//, ""));
    expect(files).toContain("native/binding.gyp");
    expect(files).toContain("models/smollm2-135m-instruct/ortserve.json");
  });

  it("leaves out tests, TypeScript sources, weights and caches", () => {
    const unwanted = files.filter(
      (f) =>
        /^(test|bench|src|\.cache|node_modules|native\/build)\//.test(f) ||
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
