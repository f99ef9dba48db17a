/**
 * Resumable results: one JSON line per (checkpoint, item) appended as each item finishes, so an
 * interrupted evaluation continues where it stopped. The file is named by the dataset's hash:
 * a changed dataset starts afresh.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import type { ItemResult } from "./evaluate.ts";

export interface StoredResult extends ItemResult {
  /** The checkpoint's UUID, or the model id for base weights. */
  target: string;
}

export class ResultStore {
  readonly path: string;
  private readonly done = new Map<string, StoredResult>();

  constructor(path: string) {
    this.path = path;
    if (!existsSync(path)) return;
    for (const line of readFileSync(path, "utf8").split("\n")) {
      if (!line.trim()) continue;
      try {
        const r = JSON.parse(line) as StoredResult;
        this.done.set(`${r.target}:${r.item}`, r);
      } catch {
        // A line cut short by an interruption: that item runs again.
      }
    }
  }

  get(target: string, item: number): StoredResult | undefined {
    return this.done.get(`${target}:${item}`);
  }

  add(target: string, result: ItemResult): void {
    const stored = { target, ...result };
    mkdirSync(dirname(this.path), { recursive: true });
    appendFileSync(this.path, `${JSON.stringify(stored)}\n`);
    this.done.set(`${target}:${result.item}`, stored);
  }
}
