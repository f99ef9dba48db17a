/**
 * Decode speed with and without a JSON Schema constraint, at 1 and 16 concurrent streams, through
 * the in-process Engine (the engine the server runs). Each stream asks for a long story; the
 * constrained run wraps it in {"story": "..."} (the mask is computed every step); both run to
 * max tokens, so the same number of tokens is timed, prompt included.
 *
 *   node bench/structured-decode.ts [--max-tokens 128] [--threads 2] [--runs 3] [--streams N]
 */
import { Engine } from "../src/engine/engine.ts";
import { median } from "./stats.ts";

const MODEL = "smollm2-135m-instruct";
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const maxTokens = arg("--max-tokens", 128);
const threads = arg("--threads", 2);
const runs = arg("--runs", 3);
const only = arg("--streams", 0);
const streamCounts = only > 0 ? [only] : [1, 16];
const SCHEMA = JSON.stringify({
  type: "object",
  // Long enough that every stream runs to max tokens, as the unconstrained ones do.
  properties: { story: { type: "string", minLength: 2000 } },
  required: ["story"],
});

const engine = await Engine.open({ workers: 1, threads, maxNumSeqs: 16 });
async function run(streams: number, constrained: boolean): Promise<{ tokens: number; seconds: number }> {
  const t0 = performance.now();
  const outs = await Promise.all(
    Array.from({ length: streams }, (_, i) =>
      engine.generate({
        model: MODEL,
        prompt: { messages: [{ role: "user", content: `Tell a long story about dragon number ${i}.` }] },
        params: {
          maxTokens,
          cacheSalt: `bench-${constrained}-${streams}-${i}-${Math.random()}`,
          sampling: { temperature: 0.7, seed: BigInt(i + 1), ignoreEos: true },
          constraint: constrained ? { kind: "json_schema", schema: SCHEMA, anyWhitespace: false } : undefined,
        },
      }),
    ),
  );
  const tokens = outs.reduce((n, o) => n + o.choices[0]!.tokenIds.length, 0);
  return { tokens, seconds: (performance.now() - t0) / 1000 };
}

// Warm-up: sessions, the grammar compile (cached afterwards) and the kernels.
await run(1, false);
await run(1, true);
const rows: string[] = [];
for (const streams of streamCounts) {
  // Plain and constrained runs alternate, so a slow spell of the machine falls on both.
  const plain: number[] = [];
  const json: number[] = [];
  for (let i = 0; i < runs; i++) {
    const a = await run(streams, false);
    const b = await run(streams, true);
    plain.push(a.tokens / a.seconds);
    json.push(b.tokens / b.seconds);
  }
  const slowdowns = plain.map((a, i) => ((a - json[i]!) / a) * 100);
  const fmt = (xs: number[]) => xs.map((x) => x.toFixed(1)).join(", ");
  rows.push(
    `${streams} stream(s): plain ${fmt(plain)} tok/s; with the schema ${fmt(json)} tok/s; ` +
      `slowdown per pair ${fmt(slowdowns)}%; median ${median(slowdowns).toFixed(1)}%`,
  );
}
console.log(rows.join("\n"));
await engine.close();
