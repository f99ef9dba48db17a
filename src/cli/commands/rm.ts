/**
 * `ortserve rm <name>`: remove an installed model's directory (converted files, checkpoints and
 * ortserve.json; the download cache is left alone). It is renamed aside first, so a scan never
 * sees half of it. A server already running keeps serving what it loaded until it restarts.
 */
import { rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { listInstalled } from "../../models/installed.ts";
import { modelsDir } from "../../util/paths.ts";
import { UsageError } from "../../util/usage-error.ts";
import { parseCommandLine } from "../args.ts";

export const summary = "remove an installed model";

export const usage = `Usage: ortserve rm <name> [options]

Removes <models-dir>/<name>/ (converted weights, checkpoints, settings). Cached downloads
stay. A running server keeps serving the model until it restarts.

Options:
  --models-dir <dir>   models directory (default: $ORTSERVE_MODELS_DIR or <repo>/models)
  -h, --help           show this help
`;

export async function removeModel(name: string, dir: string): Promise<string> {
  const models = listInstalled(dir);
  const model = models.find((m) => m.id === name);
  if (!model)
    throw new UsageError(
      `no model "${name}" in ${dir}${models.length ? ` (installed: ${models.map((m) => m.id).join(", ")})` : ""}`,
    );
  const aside = join(dir, `.rm-${process.pid}-${Date.now()}`);
  await rename(model.dir, aside);
  await rm(aside, { recursive: true, force: true });
  return model.dir;
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
  process.stderr.write(`removed ${removed}\n`);
}
