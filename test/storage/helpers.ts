import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";

/** A fresh temp dir per test, removed afterwards; returns a path for a database file inside it. */
export function useTempDb(): () => string {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), "ortserve-db-"));
    dirs.push(dir);
    return join(dir, "nested", "ortserve.db");
  };
}
