/**
 * Temporary files and directories carry the pid of the process that made them, so what a killed
 * run left behind can be told from what a live one is still writing, and removed.
 */
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Removes the entries of `dir` whose name `pattern` matches with a dead pid as its first group. */
export async function removeStaleTemps(dir: string, pattern: RegExp): Promise<void> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  for (const name of names) {
    const m = pattern.exec(name);
    if (m && !isAlive(Number(m[1]))) await rm(join(dir, name), { recursive: true, force: true });
  }
}
