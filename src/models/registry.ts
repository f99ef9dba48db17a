/**
 * The models this server can serve: every `<modelsDir>/<dir>/` with converted weights, each with
 * its checkpoints. Problems become `unavailable` entries and `warnings` rather than exceptions, so
 * one broken directory does not keep the others from being served. `refresh()` scans again while
 * the server runs (a model pulled, removed or replaced, a checkpoint added): a directory whose
 * files are as they were is not read again.
 */
import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { isDirectoryEntry } from "./registry/dir-entry.ts";
import { type ScannedDir, type ScanOptions, scanDir, stampOf } from "./registry/dir-scan.ts";
import { scanOffThread } from "./registry/scan-thread.ts";
import type { Checkpoint, Resolution, ServedModel, UnavailableModel } from "./registry/types.ts";

export { revisionOf } from "./registry/dir-scan.ts";

export type {
  Checkpoint,
  Resolution,
  SchedulingPolicy,
  ServedModel,
  UnavailableModel,
} from "./registry/types.ts";

/** "<id>:step<N>" with N in canonical decimal, so each checkpoint has exactly one name. */
const CHECKPOINT_NAME = /^(.+):step(0|[1-9]\d*)$/;

interface ScanPlan {
  /** The model directories' names, sorted. */
  names: string[];
  warnings: string[];
  /** Those whose stamp changed (or new ones): read again. */
  stale: { name: string; dir: string }[];
}

/** What a refresh changed. */
export interface RegistryChange {
  /** Ids that are served now and were not. */
  added: string[];
  /** Ids that were served and are not now. */
  removed: string[];
  /**
   * Directories that were served and are gone or were replaced by another (same path, another
   * directory), with the revision that was served: what was loaded from them must be let go.
   */
  gone: { dir: string; revision: string }[];
}

export class ModelRegistry {
  readonly modelsDir: string;
  readonly #opts: ScanOptions;
  /** Scans by directory name, as of the last scan. */
  #scans = new Map<string, ScannedDir>();
  #models = new Map<string, ServedModel>();
  #unavailable: UnavailableModel[] = [];
  #warnings: string[] = [];
  /** Checkpoint directories taken out by removeCheckpoints: never listed again, whatever a scan read. */
  readonly #removedCheckpoints = new Set<string>();

  private constructor(modelsDir: string, opts: ScanOptions) {
    this.modelsDir = modelsDir;
    this.#opts = opts;
  }

  /**
   * `checkFiles` (the server sets it) also checks each model's config, tokenizer and ONNX files
   * (`registry/model-files.ts`), so a corrupt or half-written directory is unavailable from the start.
   */
  static load(modelsDir: string, opts: ScanOptions = {}): ModelRegistry {
    const registry = new ModelRegistry(resolve(modelsDir), opts);
    registry.refresh();
    return registry;
  }

  /** Directories that look like models but cannot be served, with the reason. */
  get unavailable(): readonly UnavailableModel[] {
    return this.#unavailable;
  }

  /** Things skipped or adjusted while loading, each starting with the path concerned. */
  get warnings(): readonly string[] {
    return this.#warnings;
  }

  /** Scans the models directory again; directories whose stamp is unchanged are not read again. */
  refresh(): RegistryChange {
    const plan = this.#plan();
    return this.#apply(
      plan,
      new Map(plan.stale.map(({ name, dir }) => [name, scanDir(dir, name, this.#opts)])),
    );
  }

  /**
   * refresh(), the changed directories read on a thread of its own (the server's while serving:
   * see dir-scan.ts). Calls must not overlap (the engine chains them).
   */
  async refreshOffThread(): Promise<RegistryChange> {
    const plan = this.#plan();
    return this.#apply(plan, plan.stale.length > 0 ? await scanOffThread(plan.stale, this.#opts) : new Map());
  }

  /** The directories there are now, and which of them must be read again. */
  #plan(): ScanPlan {
    const root = this.modelsDir;
    const warnings: string[] = [];
    let names: string[];
    try {
      names = readdirSync(root, { withFileTypes: true })
        .filter((e) => isDirectoryEntry(e) && !e.name.startsWith("."))
        .map((e) => e.name)
        .sort();
    } catch (err) {
      warnings.push(`${root}: cannot read models directory (${(err as Error).message})`);
      names = [];
    }
    const stale: ScanPlan["stale"] = [];
    for (const name of names) {
      const dir = join(root, name);
      const before = this.#scans.get(name);
      if (!before || before.stamp !== stampOf(dir)) stale.push({ name, dir });
    }
    return { names, warnings, stale };
  }

  #apply({ names, warnings }: ScanPlan, fresh: Map<string, ScannedDir>): RegistryChange {
    const root = this.modelsDir;
    const scans = new Map<string, ScannedDir>();
    for (const name of names) {
      const scan = fresh.get(name) ?? this.#scans.get(name);
      if (!scan) continue;
      // A checkpoint the DELETE route took out while the scan read its directory stays out.
      scan.checkpoints = scan.checkpoints.filter((c) => !this.#removedCheckpoints.has(c.dir));
      for (const dir of this.#removedCheckpoints) scan.revisions.delete(dir);
      scans.set(name, scan);
    }
    const models = new Map<string, ServedModel>();
    const unavailable: UnavailableModel[] = [];
    for (const [name, scan] of scans) {
      const { found } = scan;
      if (!found.ok) {
        unavailable.push(found.unavailable);
        continue;
      }
      const base = found.model;
      const dir = join(root, name);
      if (scan.problem) {
        unavailable.push({ id: base.id, dir, reason: scan.problem });
        continue;
      }
      const other = models.get(base.id);
      if (other) {
        unavailable.push({ id: base.id, dir, reason: `id "${base.id}" is already served from ${other.dir}` });
        continue;
      }
      warnings.push(...scan.warnings);
      models.set(base.id, { ...base, checkpoints: scan.checkpoints });
    }
    const change = this.#changeTo(scans, models);
    this.#scans = scans;
    this.#models = models;
    this.#unavailable = unavailable;
    this.#warnings = warnings;
    return change;
  }

  #changeTo(scans: Map<string, ScannedDir>, models: Map<string, ServedModel>): RegistryChange {
    const servedRevisions = (byName: Map<string, ScannedDir>, served: Map<string, ServedModel>) => {
      const revisions = new Map<string, string>();
      for (const scan of byName.values())
        if (scan.found.ok && served.get(scan.found.model.id)?.dir === scan.found.model.dir)
          for (const [dir, revision] of scan.revisions) revisions.set(dir, revision);
      return revisions;
    };
    const now = servedRevisions(scans, models);
    const gone = [...servedRevisions(this.#scans, this.#models)]
      .filter(([dir, revision]) => now.get(dir) !== revision)
      .map(([dir, revision]) => ({ dir, revision }));
    return {
      added: [...models.keys()].filter((id) => !this.#models.has(id)),
      removed: [...this.#models.keys()].filter((id) => !models.has(id)),
      gone,
    };
  }

  /** Servable models, by id. */
  list(): ServedModel[] {
    return [...this.#models.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  get(id: string): ServedModel | undefined {
    return this.#models.get(id);
  }

  /**
   * Takes the checkpoints of `steps` out of a model's list (names resolve without them from now
   * on; resolutions already made keep theirs). Returns them and the steps it has none for.
   */
  removeCheckpoints(id: string, steps: readonly number[]): { removed: Checkpoint[]; notFound: number[] } {
    const model = this.#models.get(id);
    if (!model) return { removed: [], notFound: [...steps] };
    const wanted = new Set(steps);
    const removed = model.checkpoints.filter((c) => wanted.has(c.step));
    const found = new Set(removed.map((c) => c.step));
    const kept = model.checkpoints.filter((c) => !found.has(c.step));
    this.#models.set(id, { ...model, checkpoints: kept });
    for (const c of removed) this.#removedCheckpoints.add(c.dir);
    return { removed, notFound: [...wanted].filter((s) => !found.has(s)) };
  }

  /**
   * A request's model name → what to load. "<id>" means its latest checkpoint (highest step) when
   * it has any, else its base weights; "<id>:step<N>" means that checkpoint. Unknown → undefined.
   */
  resolve(name: string): Resolution | undefined {
    const model = this.#models.get(name);
    if (model) {
      const latest = model.checkpoints.at(-1);
      if (!latest) return this.#revised({ model, dir: model.dir, format: model.format, servedName: name });
      return this.#revised({
        model,
        checkpoint: latest,
        dir: latest.dir,
        format: latest.format,
        servedName: name,
      });
    }
    const match = CHECKPOINT_NAME.exec(name);
    if (!match) return undefined;
    const owner = this.#models.get(match[1]!);
    const step = Number(match[2]);
    // Digits past 2^53 would round onto some other step.
    if (!Number.isSafeInteger(step)) return undefined;
    const checkpoint = owner?.checkpoints.find((c) => c.step === step);
    if (!owner || !checkpoint) return undefined;
    return this.#revised({
      model: owner,
      checkpoint,
      dir: checkpoint.dir,
      format: checkpoint.format,
      servedName: name,
    });
  }

  /** The resolution with the revision of its directory as scanned. */
  #revised(resolution: Omit<Resolution, "revision">): Resolution {
    for (const scan of this.#scans.values()) {
      const revision = scan.revisions.get(resolution.dir);
      if (revision !== undefined) return { ...resolution, revision };
    }
    return { ...resolution, revision: "" };
  }
}
