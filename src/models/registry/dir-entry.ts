import { type Dirent, statSync } from "node:fs";
import { join } from "node:path";

/** A directory, or a symlink to one (models are often linked in from elsewhere). */
export function isDirectoryEntry(e: Dirent): boolean {
  if (e.isDirectory()) return true;
  if (!e.isSymbolicLink()) return false;
  try {
    return statSync(join(e.parentPath, e.name)).isDirectory();
  } catch {
    return false;
  }
}
