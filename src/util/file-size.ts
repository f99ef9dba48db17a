/** A file's size in bytes, or undefined when there is no such file. */
import { stat } from "node:fs/promises";

export async function fileSize(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
