/**
 * Structured outputs under the scheduler's other features, on the real model: a priority engine
 * admits constrained requests in priority order and each keeps its own grammar, and a request whose
 * prompt comes from the prefix cache is constrained like one prefilled from scratch.
 */
import { describe, expect, it } from "vitest";
import type { StructuredConstraint } from "../../src/core/structured/constraint-spec.ts";
import { collect, request } from "../engine/engine-helpers.ts";
import { realModelEngine } from "../engine/real-model-engine.ts";
import { hasModel } from "../runner/model-fixture.ts";

// A prompt long enough to fill whole prefix-cache blocks.
const PROMPT = Array.from({ length: 96 }, (_, i) => 300 + ((i * 37) % 900));

describe.skipIf(!hasModel("q4"))("structured outputs with priority scheduling and the prefix cache", () => {
  const engine = realModelEngine({
    maxNumSeqs: 1,
    schedulingPolicy: "priority",
    maxModelLen: 512,
    prefillChunk: 64,
  });

  const choices = ["alpha", "beta", "gamma"];
  const choice: StructuredConstraint = { kind: "choice", choices };
  const digits: StructuredConstraint = { kind: "regex", pattern: "[0-9]{3}-[0-9]{2}" };

  it("admits constrained requests by priority, each in its own language", async () => {
    // Both grammars compiled first, so the queued requests reach the queue while the row is busy.
    for (const constraint of [choice, digits])
      await collect(engine.pool, engine.config, request(PROMPT.slice(0, 8), { maxTokens: 4, constraint }));
    const order: string[] = [];
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    // An unconstrained request holds the only row; the constrained ones queue behind it.
    const busy = collect(engine.pool, engine.config, request(PROMPT, { maxTokens: 200 }), (e) => {
      if (e.type === "delta") started();
    });
    await running;
    const queued = (
      [
        [5, choice],
        [1, digits],
        [3, choice],
      ] as const
    ).map(([priority, constraint], i) =>
      collect(
        engine.pool,
        engine.config,
        request(PROMPT.slice(0, 40 + i), { priority, maxTokens: 16, constraint }),
      ).then((r) => {
        order.push(`${priority}`);
        return r;
      }),
    );
    const [, low, high, mid] = await Promise.all([busy, ...queued]);
    expect(order).toEqual(["1", "3", "5"]);
    expect(choices).toContain(low!.choices[0]!.text);
    expect(choices).toContain(mid!.choices[0]!.text);
    expect(high!.choices[0]!.text).toMatch(/^[0-9]{3}-[0-9]{2}$/);
  });

  it("a prompt read from the prefix cache is constrained as one prefilled from scratch", async () => {
    const salt = `structured-${Math.random()}`;
    const cold = await collect(
      engine.pool,
      engine.config,
      request(PROMPT, { cacheSalt: salt, maxTokens: 16, constraint: digits }),
    );
    const warm = await collect(
      engine.pool,
      engine.config,
      request(PROMPT, { cacheSalt: salt, maxTokens: 16, constraint: digits }),
    );
    expect(cold.cachedTokens).toBe(0);
    expect(warm.cachedTokens).toBeGreaterThan(0);
    // Greedy: the same prompt and grammar give the same text, cached or not.
    expect(warm.choices[0]!.text).toBe(cold.choices[0]!.text);
    expect(warm.choices[0]!.text).toMatch(/^[0-9]{3}-[0-9]{2}$/);
  });
});
