/**
 * llama.cpp's own HTTP server, `llama-server`, as the HTTP reference. Built once from the llama.cpp
 * sources vendored in the pinned `llama-cpp-python` sdist (fetched with pip, checked against its
 * SHA-256): Release, native CPU flags, static, CURL off, only the server target. The binary is
 * cached in <ORTSERVE_CACHE_DIR or repo/.cache>/llama-server/<version>/llama-server.
 *
 *   node bench/llama-server.ts            # build it if missing, print its path
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync } from "node:fs";
import { copyFile, mkdir, readdir, rename, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import { cacheDir } from "../src/util/paths.ts";

export const LLAMA_CPP_PYTHON_VERSION = "0.3.16";
const SDIST = `llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}.tar.gz`;
const SDIST_SHA256 = "34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6";
const APT_PACKAGES = ["cmake", "g++", "make"];
const log = (line: string) => process.stderr.write(`${line}\n`);

export function llamaServerDir(): string {
  return join(cacheDir(), "llama-server", LLAMA_CPP_PYTHON_VERSION);
}

export function llamaServerBinary(): string {
  return join(llamaServerDir(), "llama-server");
}

/** Runs a command with its output on our stderr; rejects on a non-zero exit. */
function run(cmd: string, args: string[], cwd?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ["ignore", 2, 2] });
    child.once("error", reject);
    child.once("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(" ")} exited with ${code}`)),
    );
  });
}

function onPath(cmd: string): boolean {
  return (process.env.PATH ?? "").split(":").some((dir) => dir && existsSync(join(dir, cmd)));
}

async function ensureToolchain(): Promise<void> {
  const missing = ["cmake", "g++", "make"].filter((c) => !onPath(c));
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0)
    throw new Error(
      `building llama-server needs ${missing.join(", ")}: sudo apt-get install -y ${APT_PACKAGES.join(" ")} ` +
        "(or run the bench with --skip-llama-server)",
    );
  log(`llama-server: installing ${APT_PACKAGES.join(" ")} with apt-get`);
  await run("apt-get", ["update"]);
  await run("apt-get", ["install", "-y", "--no-install-recommends", ...APT_PACKAGES]);
}

async function sha256(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Returns the cached llama-server binary, building it first when it is missing (~10-15 min on 2 cores). */
export async function ensureLlamaServer(): Promise<string> {
  const binary = llamaServerBinary();
  if (existsSync(binary)) return binary;
  await ensureToolchain();
  const dir = llamaServerDir();
  await mkdir(dir, { recursive: true });
  const sdist = join(dir, SDIST);
  if (!existsSync(sdist) || (await sha256(sdist)) !== SDIST_SHA256) {
    log(`llama-server: fetching llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION} sources with pip`);
    await rm(sdist, { force: true });
    const python = process.env.ORTSERVE_PYTHON ?? "python3";
    await run(python, [
      "-m",
      "pip",
      "download",
      "--no-deps",
      "--no-binary",
      ":all:",
      "--no-input",
      "--disable-pip-version-check",
      `llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}`,
      "-d",
      dir,
    ]);
    const got = await sha256(sdist);
    if (got !== SDIST_SHA256) {
      await rm(sdist, { force: true });
      throw new Error(`${SDIST}: SHA-256 ${got}, expected ${SDIST_SHA256}`);
    }
  }
  const srcRoot = join(dir, `llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}`);
  if (!existsSync(srcRoot)) await run("tar", ["xzf", sdist, "-C", dir]);
  await buildServerTarget(join(srcRoot, "vendor", "llama.cpp"), join(dir, "build"), binary);
  // Keep only the binary and the sdist.
  for (const entry of await readdir(dir))
    if (entry !== "llama-server" && entry !== SDIST)
      await rm(join(dir, entry), { recursive: true, force: true });
  log(`llama-server: built ${binary}`);
  return binary;
}

/**
 * Configures and builds a llama.cpp source tree's `llama-server` target (Release, native CPU flags,
 * static, CURL off) and copies the binary to `binary`. ik_llama.cpp's tree builds the same way, with
 * its server under examples/ (`-DLLAMA_BUILD_EXAMPLES=ON`).
 */
export async function buildServerTarget(
  src: string,
  build: string,
  binary: string,
  /** Appended after the common flags, so they override them. */
  extraFlags: string[] = [],
): Promise<void> {
  await ensureToolchain();
  log(`llama-server: configuring ${src}`);
  await run("cmake", [
    "-S",
    src,
    "-B",
    build,
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",
    "-DLLAMA_CURL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    ...extraFlags,
  ]);
  log("llama-server: building (about 10-15 minutes on 2 cores)");
  await run("cmake", ["--build", build, "--config", "Release", "--target", "llama-server", "-j", "2"]);
  await copyFile(join(build, "bin", "llama-server"), `${binary}.tmp`);
  await rename(`${binary}.tmp`, binary);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface LlamaServer {
  /** OpenAI base URL, http://127.0.0.1:<port>/v1 */
  baseURL: string;
  stop(): Promise<void>;
}

/** Starts llama-server on 127.0.0.1 (a free port) and resolves once /health answers 200. */
export async function startLlamaServer(opts: {
  gguf: string;
  parallel: number;
  ctxSize: number;
  threads: number;
  /** Another build of the server (ik_llama.cpp's) instead of the one built here. */
  binary?: string;
  /** Flags after the common ones (ik_llama.cpp: `-rtr`, its repacking of weights at load). */
  extraArgs?: string[];
}): Promise<LlamaServer> {
  const binary = opts.binary ?? (await ensureLlamaServer());
  if (!existsSync(binary)) throw new Error(`${binary}: no such llama-server binary`);
  const port = await freePort();
  const child = spawn(
    binary,
    [
      "--model",
      opts.gguf,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--parallel",
      String(opts.parallel),
      "--ctx-size",
      String(opts.ctxSize),
      "--threads",
      String(opts.threads),
      "--threads-batch",
      String(opts.threads),
      "--jinja",
      // Forks may predate the flag; their web UI costs nothing the load measures.
      ...(opts.binary ? [] : ["--no-webui"]),
      ...(opts.extraArgs ?? []),
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let err = "";
  child.stderr!.on("data", (d: Buffer) => {
    err = (err + d.toString()).slice(-8000);
  });
  let exited = false;
  child.once("exit", () => {
    exited = true;
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      if (exited) return resolve();
      const kill = setTimeout(() => child.kill("SIGKILL"), 10_000);
      child.once("exit", () => {
        clearTimeout(kill);
        resolve();
      });
      child.kill("SIGTERM");
    });
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (exited) throw new Error(`llama-server exited during start-up:\n${err}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`llama-server did not become healthy in 120 s:\n${err}`);
    }
    const ok = await fetch(`http://127.0.0.1:${port}/health`)
      .then((r) => r.ok)
      .catch(() => false);
    if (ok) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  return { baseURL: `http://127.0.0.1:${port}/v1`, stop };
}

/**
 * Single-stream greedy decode tok/s as the server itself times it (`timings.predicted_per_second`
 * of a non-streamed /completion): `prompt` as token ids, `newTokens` generated, EOS ignored, no
 * prompt cache, so the figure compares with an in-process decode rate on the same ids.
 */
export async function serverDecodeRate(
  baseURL: string,
  prompt: number[],
  newTokens: number,
): Promise<number> {
  const root = baseURL.replace(/\/v1$/, "");
  const r = await fetch(`${root}/completion`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      prompt,
      n_predict: newTokens,
      temperature: 0,
      ignore_eos: true,
      cache_prompt: false,
    }),
  });
  if (!r.ok) throw new Error(`${root}/completion: HTTP ${r.status} ${await r.text()}`);
  const body = (await r.json()) as { timings?: { predicted_per_second?: number; predicted_n?: number } };
  const rate = body.timings?.predicted_per_second;
  if (typeof rate !== "number" || !(rate > 0))
    throw new Error(`${root}/completion: no timings.predicted_per_second`);
  if (body.timings?.predicted_n !== newTokens)
    throw new Error(`${root}/completion: ${body.timings?.predicted_n} tokens generated, ${newTokens} asked`);
  return rate;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv.includes("--help") || process.argv.includes("-h"))
    log("usage: node bench/llama-server.ts");
  else console.log(await ensureLlamaServer());
}
