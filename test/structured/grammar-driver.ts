/** Drives a constraint's matcher token by token over SmolLM2's real vocabulary (tests only). */
import { expect } from "vitest";
import { loadTransformersTokenizer } from "../../src/core/runner/tokenizer.ts";
import type { StructuredConstraint } from "../../src/core/structured/constraint-spec.ts";
import { GrammarBackend } from "../../src/core/structured/grammar-backend.ts";
import { readGrammarVocabulary } from "../../src/core/structured/vocabulary.ts";
import { MODEL_DIR } from "../runner/model-fixture.ts";

export const VOCAB = 49152;
export const EOS = 2;

export interface GrammarDriver {
  backend: GrammarBackend;
  encode(text: string): number[];
  /** Feeds the text's tokens one by one; the step at which the grammar refused, or "accepted". */
  drive(c: StructuredConstraint, text: string): Promise<number | "accepted">;
}

const allowed = (mask: Uint32Array, id: number) => ((mask[id >>> 5]! >>> (id & 31)) & 1) === 1;

export async function grammarDriver(): Promise<GrammarDriver> {
  const backend = new GrammarBackend(readGrammarVocabulary(MODEL_DIR, VOCAB, [EOS]));
  const tok = await loadTransformersTokenizer(MODEL_DIR);
  const encode = (text: string) => tok.encode(text, { add_special_tokens: false });
  async function drive(c: StructuredConstraint, text: string): Promise<number | "accepted"> {
    const [m] = await backend.constraints(c, 1);
    const mask = new Uint32Array(VOCAB / 32);
    const ids = encode(text);
    try {
      for (let i = 0; i < ids.length; i++) {
        mask.fill(0);
        await m!.fillMask(mask);
        if (!allowed(mask, ids[i]!)) return i;
        expect(m!.accept(ids[i]!)).toBe(true);
      }
      mask.fill(0);
      await m!.fillMask(mask);
      if (!allowed(mask, EOS)) return ids.length;
      m!.accept(EOS);
      expect(m!.terminated).toBe(true);
      return "accepted";
    } finally {
      m!.release();
    }
  }
  return { backend, encode, drive };
}

// Counted repetitions in patterns: XGrammar spends seconds on each (a pass over the vocabulary
// per counted character, up to about 256 of them; 3.5 s for one on a 2 vCPU EPYC), far past 300 ms.
/** A constraint far past a short compile budget. */
export const SLOW: StructuredConstraint = {
  kind: "json_schema",
  schema: JSON.stringify({
    type: "object",
    properties: Object.fromEntries(
      ["a-z", "0-9", "A-Z", "a-f"].map((chars, i) => [
        `p${i}`,
        { type: "string", pattern: `^[${chars}]{0,${2000 + i}}$` },
      ]),
    ),
  }),
  anyWhitespace: true,
};
