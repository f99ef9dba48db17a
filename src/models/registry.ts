/**
 * The models this server can serve: every `<modelsDir>/<dir>/` with converted weights, each with
 * its checkpoints. Loaded once at startup; problems become `unavailable` entries and `warnings`
 * rather than exceptions, so one broken directory does not keep the others from being served.
 */
import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { scanCheckpoints } from "./registry/checkpoint-dir.ts";
import { isDirectoryEntry } from "./registry/dir-entry.ts";
import { readModelDir } from "./registry/model-dir.ts";
import { modelFilesProblem } from "./registry/model-files.ts";
import type { Checkpoint, Resolution, ServedModel, UnavailableModel } from "./registry/types.ts";

export type {
  Checkpoint,
  Resolution,
  SchedulingPolicy,
  ServedModel,
  UnavailableModel,
} from "./registry/types.ts";

/** "<id>:step<N>" with N in canonical decimal, so each checkpoint has exactly one name. */
const CHECKPOINT_NAME = /^(.+):step(0|[1-9]\d*)$/;

export class ModelRegistry {
  readonly modelsDir: string;
  /** Directories that look like models but cannot be served, with the reason. */
  readonly unavailable: UnavailableModel[];
  /** Things skipped or adjusted while loading, each starting with the path concerned. */
  readonly warnings: string[];
  readonly #models: Map<string, ServedModel>;

  private constructor(
    modelsDir: string,
    models: Map<string, ServedModel>,
    unavailable: UnavailableModel[],
    warnings: string[],
  ) {
    this.modelsDir = modelsDir;
    this.#models = models;
    this.unavailable = unavailable;
    this.warnings = warnings;
  }

  /**
   * `checkFiles` (the server sets it) also checks each model's config, tokenizer and ONNX files
   * (`registry/model-files.ts`), so a corrupt or half-written directory is unavailable from the start.
   */
  static load(modelsDir: string, opts: { checkFiles?: boolean } = {}): ModelRegistry {
    const root = resolve(modelsDir);
    const models = new Map<string, ServedModel>();
    const unavailable: UnavailableModel[] = [];
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
    for (const name of names) {
      const dir = join(root, name);
      const found = readModelDir(dir, name);
      if (!found.ok) {
        unavailable.push(found.unavailable);
        continue;
      }
      const { model: base } = found;
      const problem = opts.checkFiles ? modelFilesProblem(dir, base.format) : undefined;
      if (problem) {
        unavailable.push({ id: base.id, dir, reason: problem });
        continue;
      }
      warnings.push(...found.warnings);
      const other = models.get(base.id);
      if (other) {
        const reason = `id "${base.id}" is already served from ${other.dir}`;
        unavailable.push({ id: base.id, dir, reason });
        continue;
      }
      const { checkpoints, warnings: skipped } = scanCheckpoints(dir, base.format, opts);
      warnings.push(...skipped);
      models.set(base.id, { ...base, checkpoints });
    }
    return new ModelRegistry(root, models, unavailable, warnings);
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
    this.#models.set(id, { ...model, checkpoints: model.checkpoints.filter((c) => !found.has(c.step)) });
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
      if (!latest) return { model, dir: model.dir, format: model.format, servedName: name };
      return { model, checkpoint: latest, dir: latest.dir, format: latest.format, servedName: name };
    }
    const match = CHECKPOINT_NAME.exec(name);
    if (!match) return undefined;
    const owner = this.#models.get(match[1]!);
    const step = Number(match[2]);
    // Digits past 2^53 would round onto some other step.
    if (!Number.isSafeInteger(step)) return undefined;
    const checkpoint = owner?.checkpoints.find((c) => c.step === step);
    if (!owner || !checkpoint) return undefined;
    return { model: owner, checkpoint, dir: checkpoint.dir, format: checkpoint.format, servedName: name };
  }
}
