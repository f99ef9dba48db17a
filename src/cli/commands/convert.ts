/**
 * `ortserve convert <file.gguf> <model-dir>`: convert any GGUF to ONNX with a
 * progress bar. Writes the same conversion stamp as `setup`, so converting the
 * default model by hand is not repeated by a later `setup`.
 */
import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import { convertAndStamp, loadConverter } from "../../models/convert/run-conversion.ts";
import { sha256File } from "../../models/fetch/digest.ts";
import { ProgressBar } from "../../util/progress.ts";
import { UsageError } from "../../util/usage-error.ts";
import { parseCommandLine, parseFormat } from "../args.ts";

export const summary = "convert a GGUF file to ONNX in a model directory";

export const usage = `Usage: ortserve convert <file.gguf> <model-dir> [options]

Converts a GGUF model to ONNX. Writes config.json, generation_config.json,
tokenizer files and onnx/model_q4.onnx (+ .onnx_data) or onnx/model.onnx into
<model-dir>, e.g. models/my-model.

Options:
  --format q4|fp32     ONNX flavour to produce (default: q4)
  --allow-requantize   q4: requantize tensors whose type ortserve cannot map exactly
                       (Q8_K) to 8-bit blocks instead of refusing the file;
                       the model is then not the file's, and says so
  --q8k-activations    q4: quantize the activations of K-quant weights as llama.cpp
                       does, in Q8_K blocks of 256 inputs (its arithmetic); by default
                       they go in blocks of 32, closer to the exact model
  -h, --help           show this help

Every other GGUF type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; F32,
F16 and BF16 in their own 16 bits) reaches the kernels as the values the file encodes;
the converter prints what it did per type.
`;

export async function run(argv: string[]): Promise<void> {
  const { values, positionals } = parseCommandLine({
    args: argv,
    allowPositionals: true,
    options: {
      format: { type: "string" },
      "allow-requantize": { type: "boolean" },
      "q8k-activations": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  if (positionals.length !== 2) throw new UsageError("expected <file.gguf> and <model-dir>");
  const format = parseFormat(values.format, "q4");
  if (values["q8k-activations"] && format !== "q4")
    throw new UsageError("--q8k-activations is for --format q4: fp32 keeps its activations in float32");
  const ggufPath = resolve(positionals[0]!);
  const modelDir = resolve(positionals[1]!);
  const info = await stat(ggufPath).catch(() => undefined);
  if (!info?.isFile()) throw new UsageError(`not a file: ${positionals[0]}`);

  const converter = await loadConverter();
  // The stamp identifies the source by content, so hash it first (a few seconds per GB).
  const bar = new ProgressBar({ title: "Hashing GGUF", total: info.size, unit: "bytes" });
  const ggufSha256 = await sha256File(ggufPath, (n) => bar.update(n));
  bar.done();
  await convertAndStamp({
    ggufPath,
    ggufSha256,
    modelDir,
    format,
    converter,
    allowRequantize: values["allow-requantize"] === true,
    q8kActivations: values["q8k-activations"] === true,
  });
}
