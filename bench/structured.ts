/**
 * Structured outputs over a JSONSchemaBench-style folder (one `{schema, tests: [{valid, data}]}`
 * file per schema): schemas accepted vs refused (by the feature named), compile time, mask time per
 * token, valid instances masked out and invalid instances wrongly accepted by the matcher (driven
 * token by token with SmolLM2's tokenizer; must be 0 for accepted schemas; an instance a file labels
 * both ways is listed apart), and model outputs for every accepted schema (`--outputs` per schema,
 * temperature 1, through the Engine) that validate with Ajv.
 *
 * With `--think` every constraint sits behind a think block, as on a reasoning model: instances
 * are driven after a thought that ends in `</think>` (the count of invalid ones accepted must stay
 * 0), and the model's outputs start inside a block the prompt opened, held to a thinking budget of
 * 16 tokens whose forced close the grammar must still bind.
 *
 *   node bench/structured.ts <folder> [--outputs 12] [--sample K] [--in-flight 2] [--max-tokens 256]
 *                                     [--think] [--only <regex>] [--json out.json]
 *
 * `--only` keeps the schema files whose names match the regex and `--sample` a spread sample of K
 * accepted schemas for the outputs (subsets for quick runs); the JSON report names each valid
 * instance masked out and where the matcher refused it, for breaking them down by cause.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { readModelConfig } from "../src/core/model/model-config.ts";
import { loadTransformersTokenizer } from "../src/core/runner/tokenizer.ts";
import { checkSupported } from "../src/core/structured/check-constraint.ts";
import type { StructuredConstraint } from "../src/core/structured/constraint-spec.ts";
import { GrammarBackend } from "../src/core/structured/grammar-backend.ts";
import { readGrammarVocabulary } from "../src/core/structured/vocabulary.ts";
import { Engine } from "../src/engine/engine.ts";
import { ApiError } from "../src/errors.ts";
import { modelsDir } from "../src/util/paths.ts";
import { percentile } from "./stats.ts";

const MODEL = "smollm2-135m-instruct";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

const folder = process.argv[2];
if (!folder || folder.startsWith("--")) {
  console.error(
    "usage: node bench/structured.ts <folder> [--outputs N] [--sample K] [--in-flight N] [--max-tokens N] [--think] [--only <regex>] [--json out.json]",
  );
  process.exit(2);
}
/** Outputs per accepted schema (0: none), over every accepted schema or a spread sample of `--sample`. */
const outputsPerSchema = Number(arg("--outputs", "12"));
const sample = Number(arg("--sample", "0"));
/** Requests in flight (each with `outputsPerSchema` choices), so the engine runs them as one batch. */
const inFlight = Number(arg("--in-flight", "2"));
const maxTokens = Number(arg("--max-tokens", "256"));
const think = process.argv.includes("--think");
/** Reasoning that looks like an answer, with tags and JSON inside: the block must not end early. */
const THOUGHT = 'Let me think. {"a": 1} <think> is not </thin k> yet.\n</think>';
const THINK_BUDGET = 16;
const only = new RegExp(arg("--only", ""));

interface BenchFile {
  schema: unknown;
  tests?: { valid: boolean; data: unknown; description?: string }[];
}

const modelDir = join(modelsDir(), MODEL);
const decoder = readModelConfig(modelDir).decoder;
const vocab = readGrammarVocabulary(modelDir, decoder.vocabSize, decoder.eosTokenIds);
const backend = new GrammarBackend(vocab, { cacheSize: 1024 });
const tok = await loadTransformersTokenizer(modelDir);
const encode = (text: string) => tok.encode(text, { add_special_tokens: false });
const words = Math.ceil(decoder.vocabSize / 32);
const allowed = (mask: Uint32Array, id: number) => ((mask[id >>> 5]! >>> (id & 31)) & 1) === 1;

const files = readdirSync(folder)
  .filter((f) => f.endsWith(".json") && only.test(f))
  .sort();
const refusedBy = new Map<string, number>();
const backendErrors: string[] = [];
const compileMs: number[] = [];
const compileBy: [string, number][] = [];
const maskUs: number[] = [];
const accepted: {
  name: string;
  schema: unknown;
  constraint: Extract<StructuredConstraint, { kind: "json_schema" }>;
}[] = [];
let validInstances = 0;
let validMasked = 0;
let invalidInstances = 0;
const wronglyAccepted: string[] = [];
/** Instances a file lists both as valid and as invalid (a dataset error). */
const contradictory: string[] = [];
const maskedOut: {
  file: string;
  description: string;
  data: unknown;
  refused: { before: string; token: string };
}[] = [];

/**
 * Drives the instance's tokens through a fresh matcher. Returns undefined when every token and then
 * EOS was allowed, else where the matcher refused: the text before the refused token and the token.
 */
async function drive(
  c: StructuredConstraint,
  text: string,
): Promise<{ before: string; token: string } | undefined> {
  if (think) {
    c = { ...c, afterThinking: { opened: true } };
    text = THOUGHT + text;
  }
  const [m] = await backend.constraints(c, 1);
  const mask = new Uint32Array(words);
  const ids = [...encode(text), ...decoder.eosTokenIds.slice(0, 1)];
  const refusedAt = (i: number) => ({
    before: i > 0 ? tok.decode(ids.slice(0, i)).slice(-80) : "",
    token: i < ids.length ? tok.decode([ids[i]!]) : "(end)",
  });
  try {
    for (let i = 0; i < ids.length; i++) {
      mask.fill(0);
      const t0 = performance.now();
      await m!.fillMask(mask);
      maskUs.push((performance.now() - t0) * 1000);
      if (!allowed(mask, ids[i]!)) return refusedAt(i);
      m!.accept(ids[i]!);
    }
    return m!.terminated ? undefined : refusedAt(ids.length);
  } finally {
    m!.release();
  }
}

const t0 = performance.now();
for (const f of files) {
  const file = JSON.parse(readFileSync(join(folder, f), "utf8")) as BenchFile;
  const constraint: Extract<StructuredConstraint, { kind: "json_schema" }> = {
    kind: "json_schema",
    schema: JSON.stringify(file.schema),
    anyWhitespace: true,
  };
  try {
    checkSupported(constraint);
  } catch (err) {
    // "structured_outputs.json: not supported: <feature> at <pointer>" → the feature.
    const why = (err as Error).message.replace(/^[^:]*: (not supported: )?/, "").replace(/ at [^ ]*$/, "");
    refusedBy.set(why, (refusedBy.get(why) ?? 0) + 1);
    continue;
  }
  try {
    const r = await backend.compile(constraint);
    compileMs.push(r.compileMs);
    compileBy.push([f, r.compileMs]);
  } catch (err) {
    backendErrors.push(`${f}: ${(err as Error).message.slice(0, 160)}`);
    continue;
  }
  accepted.push({ name: f, schema: file.schema, constraint });
  // An instance the file labels both valid and invalid is counted apart, not as either.
  const labels = new Map<string, Set<boolean>>();
  for (const t of file.tests ?? []) {
    const text = JSON.stringify(t.data);
    labels.set(text, (labels.get(text) ?? new Set()).add(t.valid));
  }
  for (const t of file.tests ?? []) {
    const text = JSON.stringify(t.data);
    if (labels.get(text)!.size > 1) {
      if (t.valid) contradictory.push(`${f}: ${text.slice(0, 120)}`);
      continue;
    }
    const refused = await drive(constraint, text);
    const ok = refused === undefined;
    if (t.valid) {
      validInstances++;
      if (!ok) {
        validMasked++;
        maskedOut.push({ file: f, description: t.description ?? "", data: t.data, refused });
      }
    } else {
      invalidInstances++;
      if (ok) wronglyAccepted.push(`${f}: ${t.description ?? ""} ${JSON.stringify(t.data).slice(0, 120)}`);
    }
  }
}
const matcherSeconds = (performance.now() - t0) / 1000;

// Model outputs for the accepted schemas (or a spread sample of them), validated with Ajv
// (2020-12, formats): `n` choices per request, a few requests in flight so the engine batches.
const ajv = new Ajv2020({ strict: false, validateSchema: false });
addFormats.default(ajv);
let outputsRun = 0;
let outputsStopped = 0;
let outputsValid = 0;
const invalidOutputs: string[] = [];
const refusedOutputs: string[] = [];
if (outputsPerSchema > 0) {
  const engine = await Engine.open({ workers: 1, threads: 2 });
  const step = sample > 0 ? Math.max(1, Math.floor(accepted.length / sample)) : 1;
  const chosen = accepted.filter((_, i) => i % step === 0).slice(0, sample > 0 ? sample : undefined);
  const outputsOf = async (a: (typeof accepted)[number], i: number): Promise<void> => {
    let validate: ReturnType<typeof ajv.compile>;
    try {
      validate = ajv.compile(a.schema as object);
    } catch {
      return;
    }
    // A request the engine refuses (e.g. a schema whose compile outruns the server's budget on
    // a slow machine) is counted and named, not the end of the run.
    let out: Awaited<ReturnType<typeof engine.generate>>;
    try {
      const content = `Give a JSON value for this JSON Schema:\n${JSON.stringify(a.schema).slice(0, 2000)}`;
      const constraint = { ...a.constraint, anyWhitespace: false };
      out = await engine.generate({
        model: MODEL,
        // SmolLM2's ChatML with the assistant turn opening a think block, as R1's template does.
        prompt: think
          ? { text: `<|im_start|>user\n${content}<|im_end|>\n<|im_start|>assistant\n<think>\n` }
          : { messages: [{ role: "user", content }] },
        params: {
          n: outputsPerSchema,
          maxTokens,
          constraint: think ? { ...constraint, afterThinking: { opened: true } } : constraint,
          ...(think && {
            reasoning: { opened: true, budget: { tokens: THINK_BUDGET, closeText: "</think>\n\n" } },
          }),
          // Choice k draws from seed + k.
          sampling: { temperature: 1, seed: BigInt(i * outputsPerSchema + 1) },
        },
      });
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 400) throw err;
      refusedOutputs.push(`${a.name}: ${err.message}`);
      return;
    }
    for (const c of out.choices) {
      outputsRun++;
      if (c.finishReason !== "stop") continue;
      outputsStopped++;
      let value: unknown;
      const answer = think ? c.text.slice(c.text.indexOf("</think>") + "</think>".length) : c.text;
      if (think && !c.text.includes("</think>")) {
        invalidOutputs.push(`${a.name}: no close of the think block: ${c.text.slice(0, 100)}`);
        continue;
      }
      try {
        value = JSON.parse(answer);
      } catch {
        invalidOutputs.push(`${a.name}: not JSON: ${c.text.slice(0, 100)}`);
        continue;
      }
      if (validate(value)) outputsValid++;
      else invalidOutputs.push(`${a.name}: ${JSON.stringify(validate.errors).slice(0, 200)}`);
    }
  };
  try {
    let next = 0;
    const lane = async () => {
      while (next < chosen.length) {
        const i = next++;
        await outputsOf(chosen[i]!, i);
      }
    };
    await Promise.all(Array.from({ length: inFlight }, lane));
  } finally {
    await engine.close();
  }
}

const refusedTotal = [...refusedBy.values()].reduce((a, b) => a + b, 0);
const report = {
  folder,
  think,
  schemas: files.length,
  accepted: accepted.length,
  refused: refusedTotal,
  backendErrors: backendErrors.length,
  refusedBy: Object.fromEntries([...refusedBy].sort((a, b) => b[1] - a[1])),
  compileMs: {
    p50: percentile(compileMs, 50),
    p99: percentile(compileMs, 99),
    max: percentile(compileMs, 100),
  },
  slowestCompiles: compileBy
    .sort((a, b) => b[1] - a[1])
    .slice(0, 5)
    .map(([f, ms]) => `${f} ${Math.round(ms)} ms`),
  maskUs: {
    masks: maskUs.length,
    p50: percentile(maskUs, 50),
    p99: percentile(maskUs, 99),
    max: percentile(maskUs, 100),
  },
  validInstances,
  validMaskedOut: validMasked,
  invalidInstances,
  invalidWronglyAccepted: wronglyAccepted.length,
  labelledBothWays: contradictory.length,
  outputs: { run: outputsRun, finished: outputsStopped, valid: outputsValid, refused: refusedOutputs.length },
  matcherSeconds,
};
console.log(JSON.stringify(report, null, 2));
for (const w of wronglyAccepted) console.log(`WRONGLY ACCEPTED ${w}`);
for (const c of contradictory) console.log(`LABELLED BOTH VALID AND INVALID (not counted) ${c}`);
for (const e of backendErrors) console.log(`BACKEND ERROR ${e}`);
for (const o of invalidOutputs) console.log(`INVALID OUTPUT ${o}`);
for (const o of refusedOutputs) console.log(`REFUSED OUTPUT ${o}`);
const json = arg("--json", "");
if (json)
  writeFileSync(
    json,
    JSON.stringify(
      { ...report, wronglyAccepted, contradictory, backendErrors, invalidOutputs, refusedOutputs, maskedOut },
      null,
      2,
    ),
  );
