/**
 * `ortserve rm <name>`: remove an installed model's directory (converted files, checkpoints and
 * ortserve.json; the download cache is left alone). It is renamed aside first, so a scan never
 * sees half of it. The default model's committed manifest stays, so the checkout stays clean. A
 * running server stops serving it at its next scan, once the requests using it finish.
 */
import { mkdir, rename, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { MODEL_META_FILE } from "../../models/fetch/model-meta.ts";
import { listInstalled } from "../../models/installed.ts";
import { committedModelsDir, modelsDir } from "../../util/paths.ts";
import { UsageError } from "../../util/usage-error.ts";
import { parseCommandLine } from "../args.ts";
import { DEFAULT_MODEL_ID } from "./setup.ts";

export const summary = "remove an installed model";

export const usage = `Usage: ortserve rm <name> [options]

Removes <models-dir>/<name>/ (converted weights, checkpoints, settings). Cached downloads
stay. A running server stops serving the model at its next scan of the models directory
(--models-rescan-ms), once the requests already using it finish.

Options:
  --models-dir <dir>   models directory (default: $ORTSERVE_MODELS_DIR or <repo>/models)
  -h, --help           show this help
`;

export interface Removal {
  dir: string;
  /** The default model's committed manifest, left in place so `setup` can rebuild it. */
  keptManifest?: string;
}

/** `keepManifestIn`: the model directory whose ortserve.json is committed (the default model's). */
export async function removeModel(
  name: string,
  dir: string,
  keepManifestIn: string = join(committedModelsDir, DEFAULT_MODEL_ID),
): Promise<Removal> {
  const models = listInstalled(dir);
  const model = models.find((m) => m.id === name);
  if (!model)
    throw new UsageError(
      `no model "${name}" in ${dir}${models.length ? ` (installed: ${models.map((m) => m.id).join(", ")})` : ""}`,
    );
  const aside = join(dir, `.rm-${process.pid}-${Date.now()}`);
  await rename(model.dir, aside);
  let keptManifest: string | undefined;
  if (resolve(model.dir) === resolve(keepManifestIn)) {
    keptManifest = join(model.dir, MODEL_META_FILE);
    await mkdir(model.dir);
    await rename(join(aside, MODEL_META_FILE), keptManifest);
  }
  await rm(aside, { recursive: true, force: true });
  return { dir: model.dir, keptManifest };
}

export async function run(argv: string[]): Promise<void> {
  const { values, positionals } = parseCommandLine({
    args: argv,
    allowPositionals: true,
    options: {
      "models-dir": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  if (positionals.length !== 1) throw new UsageError("expected one model name");
  const removed = await removeModel(positionals[0]!, modelsDir(values["models-dir"]));
  process.stderr.write(
    removed.keptManifest
      ? `removed the converted files in ${removed.dir}; its committed ${MODEL_META_FILE} stays (\`ortserve setup\` rebuilds it)\n`
      : `removed ${removed.dir}\n`,
  );
}
