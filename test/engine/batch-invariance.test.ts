/**
 * A request's output does not depend on what else is running: on the real model, a mix of
 * requests that uses the engine's features together (n > 1, seeded sampling, beam search, prompt
 * logprobs, logprobs, structured outputs with jump-forward, penalties, priorities, prefix-cache
 * hits, prompts of several chunks, aborts) arrives staggered into a batch of 8 rows, and each
 * request that is not aborted gets what it gets alone: the same tokens, finish reasons and
 * logprobs. The mix is drawn from a fixed seed, so a failure reproduces.
 */
import { describe, expect, it } from "vitest";
import { nativeSessions } from "../../src/core/runner/native-session.ts";
import type { StructuredConstraint } from "../../src/core/structured/constraint-spec.ts";
import type { EngineRequest } from "../../src/core/types.ts";
import { hasModel } from "../runner/model-fixture.ts";
import { collect, type Result, request, sampling } from "./engine-helpers.ts";
import { realModelEngine } from "./real-model-engine.ts";

/** A small deterministic generator (LCG): the same mix on every run. */
function generator(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const CONSTRAINTS: StructuredConstraint[] = [
  { kind: "regex", pattern: "[0-9]{3}-[0-9]{2}" },
  { kind: "choice", choices: ["alpha", "beta", "gamma delta"] },
  {
    kind: "json_schema",
    schema: JSON.stringify({
      type: "object",
      properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer" } },
      required: ["name", "age"],
      // Closed: its keys are forced (jump-forward); an open object may start with any extra name.
      additionalProperties: false,
    }),
    anyWhitespace: false,
  },
];

const KINDS = [
  "greedy",
  "seeded",
  "beam",
  "promptLogprobs",
  "logprobs",
  "constraint",
  "penalty",
  "abort",
] as const;

interface Spec {
  ids: number[];
  extra: Partial<EngineRequest>;
  kind: (typeof KINDS)[number];
  delayMs: number;
  /** Aborted after this many deltas (abort requests only). */
  abortAfter: number;
}

function mix(seed: number, count: number): Spec[] {
  const next = generator(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]!;
  return Array.from({ length: count }, (_, i) => {
    // 2 to 121 tokens: up to four chunks of 32.
    const ids = Array.from(
      { length: 2 + Math.floor(next() * 120) },
      (_, t) => 300 + ((i * 97 + t * 37) % 4000),
    );
    const kind = KINDS[i % KINDS.length]!;
    const extra: Partial<EngineRequest> = {
      maxTokens: 1 + Math.floor(next() * 24),
      priority: Math.floor(next() * 3),
      // Two in five share a salt, so some prompts start from others' cached blocks.
      cacheSalt: next() < 0.4 ? "shared" : `own-${i}`,
      n: next() < 0.3 ? 2 : 1,
    };
    if (kind === "seeded") extra.sampling = sampling({ temperature: 0.9, topP: 0.9, seed: BigInt(i + 7) });
    if (kind === "beam") Object.assign(extra, { useBeamSearch: true, n: 2 });
    if (kind === "promptLogprobs") extra.promptLogprobs = 1;
    if (kind === "logprobs") extra.logprobs = 2;
    if (kind === "constraint") Object.assign(extra, { constraint: pick(CONSTRAINTS), maxTokens: 30 });
    if (kind === "penalty") extra.sampling = sampling({ repetitionPenalty: 1.3, frequencyPenalty: 0.5 });
    return { ids, extra, kind, delayMs: Math.floor(next() * 30), abortAfter: 1 + Math.floor(next() * 5) };
  });
}

/** What must not change with the company a request keeps (logprobs to 1e-3). */
function outcome(r: Result) {
  return {
    error: r.error?.message,
    choices: r.choices.map((c) => ({
      tokens: c.tokens,
      finish: c.finishReason,
      logprobs: c.logprobs.map((x) => Math.round(x * 1e3)),
    })),
  };
}

// The property of ortserve's own operators (a token's floats the same bits in any batch); ONNX
// Runtime's MatMulNBits, where those are not built, may round a row differently in a batch.
describe.skipIf(!hasModel("q4") || !nativeSessions?.blockQuantMatMul)(
  "batch invariance on the real model",
  () => {
    const engine = realModelEngine({
      maxNumSeqs: 8,
      maxModelLen: 512,
      prefillChunk: 32,
      schedulingPolicy: "priority",
    });

    it("every request of a staggered mix gets its solo output (aborted ones aside)", async () => {
      const specs = mix(2, 24);
      const run = (x: Spec, phase: string, signal?: AbortSignal, onDelta?: () => void) =>
        collect(
          engine.pool,
          engine.config,
          request(x.ids, { ...x.extra, cacheSalt: `${phase}-${x.extra.cacheSalt}` }),
          (e) => {
            if (e.type === "delta") onDelta?.();
          },
          signal,
        );
      const alone: (ReturnType<typeof outcome> | null)[] = [];
      for (const x of specs) alone.push(x.kind === "abort" ? null : outcome(await run(x, "alone")));
      const together = await Promise.all(
        specs.map(async (x) => {
          await new Promise((r) => setTimeout(r, x.delayMs));
          if (x.kind !== "abort") return outcome(await run(x, "together"));
          const abort = new AbortController();
          let deltas = 0;
          await run(x, "together", abort.signal, () => {
            if (++deltas >= x.abortAfter) abort.abort();
          }).catch(() => {});
          return null;
        }),
      );
      const differing = specs
        .map((x, i) => ({ request: i, kind: x.kind, alone: alone[i], together: together[i] }))
        .filter((d) => JSON.stringify(d.alone) !== JSON.stringify(d.together));
      expect(differing).toEqual([]);
      // The mix reached the passes that carry several kinds of rows at once: prompt chunks beside
      // decode rows, and jump-forward tokens (compact JSON keys, the regex's dash).
      const stats = Object.values(await engine.pool.stats()) as {
        mixedSteps: number;
        jumpForwardTokens: number;
        promptBatchSteps: number;
      }[];
      expect(stats[0]!.mixedSteps).toBeGreaterThan(0);
      expect(stats[0]!.jumpForwardTokens).toBeGreaterThan(0);
      // And steps that prefilled several prompts, each with what the step's budget had left.
      expect(stats[0]!.promptBatchSteps).toBeGreaterThan(0);
    });
  },
);

describe.skipIf(!hasModel("q4") || !nativeSessions?.blockQuantMatMul)(
  "several prompts prefilled in one step on the real model",
  () => {
    const engine = realModelEngine({ maxNumSeqs: 8, maxModelLen: 256, prefillChunk: 128 });
    /** Two prefix blocks every prompt of the burst shares, then a tail of its own. */
    const shared = Array.from({ length: 32 }, (_, t) => 500 + ((t * 53) % 3000));
    const prompt = (i: number) => [
      ...shared,
      ...Array.from({ length: 3 + 7 * i }, (_, t) => 900 + i * 41 + t),
    ];
    const burst: Partial<EngineRequest>[] = [
      { maxTokens: 8 },
      { maxTokens: 6, n: 2, sampling: sampling({ temperature: 0.8, seed: 3n }) },
      { maxTokens: 12 },
      { maxTokens: 10, logprobs: 1 },
      { maxTokens: 7 },
      { maxTokens: 9, promptLogprobs: 1 },
    ];
    const run = (i: number, salt: string, signal?: AbortSignal, onPrompt?: () => void) =>
      collect(
        engine.pool,
        engine.config,
        request(prompt(i), { ...burst[i], cacheSalt: salt }),
        (e) => {
          if (e.type === "prompt") onPrompt?.();
        },
        signal,
      );

    it("a burst gets its solo outputs, a middle prompt aborted as its prefill ends, and later hits the cache", async () => {
      const alone: ReturnType<typeof outcome>[] = [];
      for (let i = 0; i < burst.length; i++) alone.push(outcome(await run(i, `alone-${i}`)));
      const before = (Object.values(await engine.pool.stats())[0] as { promptBatchSteps: number })
        .promptBatchSteps;
      // All at once: the step's 128 prompt tokens start several of them together.
      const middle = new AbortController();
      const together = await Promise.all(
        burst.map((_, i) =>
          i === 2
            ? run(i, "burst", middle.signal, () => middle.abort()).catch(() => null)
            : run(i, "burst").then(outcome),
        ),
      );
      together.forEach((t, i) => {
        if (i !== 2) expect({ request: i, ...t }).toEqual({ request: i, ...alone[i] });
      });
      const after = (Object.values(await engine.pool.stats())[0] as { promptBatchSteps: number })
        .promptBatchSteps;
      expect(after).toBeGreaterThan(before);
      // Prompts admitted together may miss each other's blocks; a request after the burst hits them.
      const later = await run(4, "burst");
      expect(later.cachedTokens).toBeGreaterThanOrEqual(shared.length);
      expect(outcome(later)).toEqual(alone[4]);
    });
  },
);
