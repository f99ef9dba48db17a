/** Starts a real `ortserve serve` process on a free port for end-to-end tests (on the default model: startDefaultModelServer). */
import { type ChildProcess, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { modelsDir, repoRoot } from "../../src/util/paths.ts";

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  stderr: () => string;
  /** The process's peak resident memory so far (Linux VmHWM), in bytes. */
  peakRssBytes(): number;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function startServerProcess(opts: {
  modelsDir: string;
  dbPath: string;
  apiKey: string;
  extraArgs?: string[];
  /** The command and its first arguments (default: this Node on the sources' CLI). */
  command?: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}): Promise<ServerProcess> {
  const [program, ...programArgs] = opts.command ?? [process.execPath, join(repoRoot, "src/cli/main.ts")];
  const child = spawn(
    program!,
    [
      ...programArgs,
      "serve",
      "--no-setup",
      "--port",
      "0",
      "--models-dir",
      opts.modelsDir,
      "--db",
      opts.dbPath,
      "--max-num-seqs",
      "8",
      ...(opts.extraArgs ?? []),
    ],
    {
      cwd: opts.cwd,
      env: { ...(opts.env ?? process.env), ORTSERVE_API_KEY: opts.apiKey },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let err = "";
  child.stderr!.on("data", (d: Buffer) => {
    err += d.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${err}`)), 60_000);
    const check = () => {
      const m = /serving on (http:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stderr!.on("data", check);
    child.once("exit", (code) => reject(new Error(`server exited with ${code}:\n${err}`)));
  });
  return {
    url,
    child,
    stderr: () => err,
    peakRssBytes: () => {
      const kb = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"));
      if (!kb) throw new Error("no VmHWM in /proc/<pid>/status");
      return Number(kb[1]) * 1024;
    },
    stop: (signal = "SIGTERM") =>
      new Promise((resolve) => {
        // A process killed by a signal has exitCode null and its signalCode set.
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        child.once("exit", (code) => resolve(code));
        child.kill(signal);
      }),
  };
}

/** The default model as a fresh setup converts it (the e2e suites skip when it is not there). */
export const DEFAULT_MODEL = "smollm2-135m-instruct";
export const defaultModelDir = join(modelsDir(), DEFAULT_MODEL);
export const haveDefaultModel = existsSync(join(defaultModelDir, "onnx", "model_q4.onnx"));

export interface DefaultModelServer {
  /** A temporary folder holding `models` (a link to the default model) and the server's SQLite file. */
  root: string;
  models: string;
  dbPath: string;
  server: ServerProcess;
  /** The official client on the server's /v1 with its key, no retries. */
  client: OpenAI;
  /** Stops the server and removes `root`. */
  close(): Promise<void>;
}

/**
 * The default model's files under another id, with settings of its own in ortserve.json (the rest
 * linked, not copied): the same weights served with other model defaults.
 */
function addDefaultModelVariant(models: string, id: string, settings: Record<string, unknown>): void {
  const dir = join(models, id);
  mkdirSync(dir);
  for (const entry of readdirSync(defaultModelDir))
    if (entry !== "ortserve.json") symlinkSync(join(defaultModelDir, entry), join(dir, entry));
  const meta = JSON.parse(readFileSync(join(defaultModelDir, "ortserve.json"), "utf8")) as object;
  writeFileSync(join(dir, "ortserve.json"), JSON.stringify({ ...meta, ...settings, id }));
}

/**
 * A real `ortserve serve` on the default model (and any `variants` of it: id → ortserve.json
 * settings), in a temporary folder of its own.
 */
export async function startDefaultModelServer(opts: {
  prefix: string;
  apiKey: string;
  extraArgs?: string[];
  variants?: Record<string, Record<string, unknown>>;
}): Promise<DefaultModelServer> {
  const root = mkdtempSync(join(tmpdir(), opts.prefix));
  const models = join(root, "models");
  mkdirSync(models);
  symlinkSync(defaultModelDir, join(models, DEFAULT_MODEL), "dir");
  for (const [id, settings] of Object.entries(opts.variants ?? {}))
    addDefaultModelVariant(models, id, settings);
  const dbPath = join(root, "ortserve.db");
  const server = await startServerProcess({
    modelsDir: models,
    dbPath,
    apiKey: opts.apiKey,
    extraArgs: opts.extraArgs,
  });
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: opts.apiKey, maxRetries: 0 });
  return {
    root,
    models,
    dbPath,
    server,
    client,
    close: async () => {
      await server.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
