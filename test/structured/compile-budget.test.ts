/**
 * The grammar compile budget: a constraint is compiled first in a thread of its own, and one
 * that overruns the budget is refused (a 400 naming its field and the budget) without the
 * engine's thread ever compiling it; the overrun thread is replaced, so the next constraint
 * compiles; XGrammar's own refusals come back as refusals.
 */
import { describe, expect, it } from "vitest";
import { CompileBudget } from "../../src/core/structured/compile-budget.ts";
import type { StructuredConstraint } from "../../src/core/structured/constraint-spec.ts";
import { GrammarBackend } from "../../src/core/structured/grammar-backend.ts";
import { readGrammarVocabulary } from "../../src/core/structured/vocabulary.ts";
import { hasModel, MODEL_DIR } from "../runner/model-fixture.ts";
import { EOS, SLOW, VOCAB } from "./grammar-driver.ts";

const QUICK: StructuredConstraint = { kind: "choice", choices: ["yes", "no"] };

describe.skipIf(!hasModel("q4"))("grammar compile budget", () => {
  const vocab = () => readGrammarVocabulary(MODEL_DIR, VOCAB, [EOS]);

  it("an overrun is refused naming the budget, at once when sent again; the next constraint compiles", async () => {
    const budget = new CompileBudget(vocab(), 300);
    try {
      await expect(budget.check(SLOW, "slow")).rejects.toMatchObject({
        code: "invalid_request",
        param: "structured_outputs.json",
        message: expect.stringContaining("longer than 300 ms"),
      });
      await expect(budget.check(SLOW, "slow")).rejects.toThrow("grammar compile budget");
      await expect(budget.check(QUICK, "quick")).resolves.toBeUndefined();
      await expect(budget.check({ kind: "grammar", grammar: "root ::= nope" }, "bad")).rejects.toMatchObject({
        param: "structured_outputs.grammar",
        message: expect.stringContaining("nope"),
      });
      // XGrammar's refusal dropped that thread's instance; a new one takes the next constraint.
      await expect(budget.check(QUICK, "quick-again")).resolves.toBeUndefined();
    } finally {
      await budget.close();
    }
  });

  it("checks add nothing that piles up on the pool (no MaxListenersExceededWarning after many)", async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    const budget = new CompileBudget(vocab(), 10_000);
    try {
      // Node warns once an emitter holds more than 10 listeners for one event.
      for (let i = 0; i < 12; i++) await budget.check(QUICK, `quick-${i}`);
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning").map((w) => w.message)).toEqual(
        [],
      );
    } finally {
      process.off("warning", onWarning);
      await budget.close();
    }
  });

  it("the backend refuses an overrun before compiling it on its own thread", async () => {
    const backend = new GrammarBackend(vocab(), { compileTimeoutMs: 300 });
    try {
      await expect(backend.compile(SLOW)).rejects.toThrow("grammar compile budget");
      expect(backend.cachedGrammars).toBe(0);
      const quick = await backend.compile(QUICK);
      expect(quick.compileMs).toBeGreaterThan(0);
      expect(backend.cachedGrammars).toBe(1);
    } finally {
      await backend.close();
    }
  });
});
