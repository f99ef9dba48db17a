/**
 * Where ortserve keeps things on disk. Everything is anchored at the repository root
 * (derived from this file's location, not the working directory) so commands behave
 * the same from any cwd; environment variables move the bulky parts elsewhere.
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Absolute path of the repository checkout (this file lives in <repo>/src/util/).
 * Debt: installed as a package this is the package's folder under node_modules, so the default
 * cache, models directory and database live there and go with a reinstall; a per-user default
 * (XDG directories) would suit an installed CLI better.
 */
export const repoRoot: string = resolve(fileURLToPath(new URL("../..", import.meta.url)));

type Env = Record<string, string | undefined>;

/** Download/extraction cache, gitignored: `ORTSERVE_CACHE_DIR` or `<repo>/.cache`. */
export function cacheDir(env: Env = process.env): string {
  const override = env.ORTSERVE_CACHE_DIR;
  return override ? resolve(override) : resolve(repoRoot, ".cache");
}

/** Cached GGUF files fetched for the default models. */
export function ggufCacheDir(env: Env = process.env): string {
  return resolve(cacheDir(env), "gguf");
}

/**
 * Directory holding one sub-directory per model. Precedence: an explicit
 * `--models-dir` value, then `ORTSERVE_MODELS_DIR`, then `<repo>/models`.
 */
export function modelsDir(override?: string, env: Env = process.env): string {
  const chosen = override || env.ORTSERVE_MODELS_DIR;
  return chosen ? resolve(chosen) : resolve(repoRoot, "models");
}

/** The committed models directory, which always holds the shipped `ortserve.json` files. */
export const committedModelsDir: string = resolve(repoRoot, "models");
