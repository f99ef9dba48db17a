/**
 * `ortserve chat`: make sure the default model is ready (same as `setup`) and run one chat turn
 * in-process through the engine the server runs, streaming the reply to stdout.
 */
import { parseCommandLine, parsePositiveInt } from "../args.ts";
import { runSetup } from "./setup.ts";

export const summary = "run one chat turn on the default model from the command line";

export const DEFAULT_PROMPT = "Hello! Who are you, and what can you do?";
const DEFAULT_MAX_TOKENS = 128;

export const usage = `Usage: ortserve chat [options]

Runs setup (fetch + convert the default model, skipped when done), then one greedy
chat turn in this process (no server, no API key), streaming the reply to stdout.

Options:
  -p, --prompt <text>    user message (default: "${DEFAULT_PROMPT}")
  --max-tokens <n>       most tokens to generate (default: ${DEFAULT_MAX_TOKENS})
  --models-dir <dir>     models directory (default: $ORTSERVE_MODELS_DIR or <repo>/models)
  -h, --help             show this help
`;

export async function run(argv: string[]): Promise<void> {
  const { values } = parseCommandLine({
    args: argv,
    options: {
      prompt: { type: "string", short: "p" },
      "max-tokens": { type: "string" },
      "models-dir": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  const maxTokens = parsePositiveInt("--max-tokens", values["max-tokens"], DEFAULT_MAX_TOKENS);
  const prompt = values.prompt ?? DEFAULT_PROMPT;

  const { modelDir } = await runSetup({ modelsDir: values["models-dir"] });
  process.stderr.write(`> ${prompt}\n`);
  const { dirname, basename } = await import("node:path");
  const { Engine } = await import("../../engine/engine.ts");
  const engine = await Engine.open({ modelsDir: dirname(modelDir) });
  try {
    await engine.generate(
      {
        model: basename(modelDir),
        prompt: { messages: [{ role: "user", content: prompt }] },
        params: { maxTokens, sampling: { temperature: 0 } },
      },
      {
        onEvent: (e) => {
          if (e.type === "delta") process.stdout.write(e.text);
        },
      },
    );
  } finally {
    await engine.close();
  }
  process.stdout.write("\n");
}
