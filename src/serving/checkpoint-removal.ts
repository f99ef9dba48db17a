/**
 * Removing a model's checkpoints while the server runs. At once: each checkpoint is marked removed
 * on disk (never served again, even after a restart) and leaves the registry (its name stops
 * resolving; "<id>" resolves to the latest remaining). Then, in the background: requests already
 * using it finish, its engines are freed in their workers, and its directory is deleted.
 */
import type { Engine } from "../engine/engine.ts";
import { modelNotFound } from "../errors.ts";
import { deleteCheckpointDir, markRemoved } from "../models/checkpoint-removal.ts";
import type { Logger } from "../observability/logger.ts";
import type { DeleteCheckpointsResponse } from "../protocol/checkpoint-delete.ts";

export class CheckpointRemoval {
  private readonly engine: Engine;
  private readonly logger: Logger;
  private readonly pending = new Set<Promise<void>>();

  constructor(deps: { engine: Engine; logger: Logger }) {
    this.engine = deps.engine;
    this.logger = deps.logger;
  }

  remove(modelId: string, steps: readonly number[]): DeleteCheckpointsResponse {
    const registry = this.engine.registry;
    const model = registry.get(modelId);
    if (!model) throw modelNotFound(modelId);
    const wanted = new Set(steps);
    // On disk first: a failure here leaves the checkpoint listed and served, as it was.
    const marked = model.checkpoints.filter((c) => wanted.has(c.step));
    for (const c of marked) markRemoved(c.dir);
    const { removed, notFound } = registry.removeCheckpoints(modelId, steps);
    for (const c of removed) {
      this.logger.info("checkpoint removed", { model: modelId, step: c.step, id: c.id });
      const done = this.deleteWhenUnused(c.dir).finally(() => this.pending.delete(done));
      this.pending.add(done);
    }
    return { deleted_count: removed.length, not_found_steps: notFound };
  }

  /** Resolves once every removal so far has deleted its files (or failed to, logged). */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending);
  }

  private async deleteWhenUnused(dir: string): Promise<void> {
    try {
      await this.engine.release(dir);
      deleteCheckpointDir(dir);
    } catch (err) {
      // Still marked removed: never served again; the directory stays for an operator to delete.
      this.logger.error("checkpoint files not deleted", { dir, error: String(err) });
    }
  }
}
