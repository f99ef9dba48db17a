/**
 * Loads XGrammar's WebAssembly build (`@mlc-ai/web-xgrammar`). The package ships a UMD bundle
 * inside a `"type": "module"` package, which Node refuses to import; a byte-for-byte `.cjs` copy of
 * the bundle, written once to the temporary directory, loads through `require`. Each call of
 * `loadXGrammar()` returns a fresh instance (its own WebAssembly memory): an instance whose C++
 * code aborted (XGrammar reports bad input by aborting) is dropped and never used again.
 */
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type XGrammarDefault from "@mlc-ai/web-xgrammar";

export type XGrammar = typeof XGrammarDefault;
export type {
  CompiledGrammar,
  Grammar,
  GrammarCompiler,
  GrammarMatcher,
  TokenizerInfo,
} from "@mlc-ai/web-xgrammar";

const require = createRequire(import.meta.url);

let copyPath: string | undefined;

/** The bundle's `.cjs` copy, named by the package version and size so versions never mix. */
function bundleCopy(): string {
  if (copyPath) return copyPath;
  const bundle = require.resolve("@mlc-ai/web-xgrammar");
  const pkg = JSON.parse(readFileSync(join(dirname(bundle), "..", "package.json"), "utf8")) as {
    version: string;
  };
  const path = join(tmpdir(), `ortserve-web-xgrammar-${pkg.version}-${statSync(bundle).size}.cjs`);
  if (!existsSync(path)) {
    // Written under a private name and renamed, so concurrent workers never read half a file.
    const partial = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    writeFileSync(partial, readFileSync(bundle));
    renameSync(partial, path);
  }
  copyPath = path;
  return path;
}

/**
 * XGrammar prints the reason of an abort on stderr through `console.error`, bound when the
 * instance starts. Each instance is started with a router in its place, so the text of an error
 * can be caught (`captureErrors`) and returned to the client.
 */
let sink: ((line: string) => void) | undefined;
function routeError(...args: unknown[]): void {
  if (sink) sink(args.map(String).join(" "));
  else consoleError(...args);
}
const consoleError = console.error.bind(console);

/** Runs `fn`, collecting what the instance reports on stderr meanwhile. */
export async function captureErrors<T>(
  fn: () => Promise<T>,
): Promise<{ value?: T; error?: unknown; messages: string[] }> {
  const messages: string[] = [];
  const previous = sink;
  sink = (line) => messages.push(line);
  try {
    return { value: await fn(), messages };
  } catch (error) {
    return { error, messages };
  } finally {
    sink = previous;
  }
}

/** A fresh, started instance of the WebAssembly module. */
export async function loadXGrammar(): Promise<XGrammar> {
  const path = bundleCopy();
  delete require.cache[path];
  const xg = require(path) as XGrammar;
  const original = console.error;
  console.error = routeError;
  try {
    // The first call starts the instance (the WebAssembly binding is created lazily).
    (await xg.Grammar.builtinJSONGrammar()).dispose();
  } finally {
    console.error = original;
  }
  return xg;
}

/** The reason XGrammar gave for an abort, without its build-machine source path. */
export function abortReason(messages: readonly string[], error: unknown): string {
  const fatal = messages.find((m) => m.includes("[FATAL]"));
  if (fatal) return fatal.replace(/^\[FATAL\]\s*\S+:\d+:\s*/, "").trim();
  return error instanceof Error ? error.message : String(error);
}
