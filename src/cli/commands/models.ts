/** `ortserve models`: the models directory's models, with size, architecture, quant mix and formats. */
import { listInstalled } from "../../models/installed.ts";
import { modelsDir } from "../../util/paths.ts";
import { formatAmount } from "../../util/progress.ts";
import { parseCommandLine } from "../args.ts";

export const summary = "list the installed models (size, architecture, quant mix, formats)";

export const usage = `Usage: ortserve models [options]

Lists every model directory under the models directory: id, size on disk, architecture,
the tensor types of the weights it was converted from, and the ONNX formats present.
A model that cannot be served says why.

Options:
  --json               one JSON array instead of the table
  --models-dir <dir>   models directory (default: $ORTSERVE_MODELS_DIR or <repo>/models)
  -h, --help           show this help
`;

export function formatTable(rows: readonly string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, c) => cell.padEnd(widths[c]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

export async function run(argv: string[]): Promise<void> {
  const { values } = parseCommandLine({
    args: argv,
    options: {
      json: { type: "boolean" },
      "models-dir": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  const dir = modelsDir(values["models-dir"]);
  const models = listInstalled(dir);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(models, null, 2)}\n`);
    return;
  }
  if (models.length === 0) {
    process.stderr.write(`no models in ${dir}; \`ortserve pull <name>\` fetches one\n`);
    return;
  }
  const rows = [["NAME", "SIZE", "ARCHITECTURE", "QUANT MIX", "FORMATS"]];
  for (const m of models)
    rows.push([
      m.id,
      formatAmount(m.bytes, "bytes"),
      m.architecture ?? "-",
      m.quantMix ?? "-",
      m.problem ? `not servable: ${m.problem}` : m.formats.join(",") || "-",
    ]);
  process.stdout.write(`${formatTable(rows)}\n`);
}
