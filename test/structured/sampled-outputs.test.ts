/**
 * Outputs sampled through the matcher validate: for every keyword case the checker allows, random
 * walks over SmolLM2's vocabulary (each step a seeded random pick among the tokens the mask
 * allows, ending where the grammar lets it) produce JSON that Ajv (2020-12, formats) accepts.
 * This exercises what generation exercises, without a model.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { beforeAll, describe, expect, it } from "vitest";
import { checkSupported } from "../../src/core/structured/check-constraint.ts";
import type { StructuredConstraint } from "../../src/core/structured/constraint-spec.ts";
import type { GrammarBackend } from "../../src/core/structured/grammar-backend.ts";
import { hasModel } from "../runner/model-fixture.ts";
import { EOS, grammarDriver, VOCAB } from "./grammar-driver.ts";
import { KEYWORD_CASES } from "./keyword-cases.ts";

const WALKS = 12;
const MAX_STEPS = 48;
/** Ids below this are the vocabulary's short pieces (digits, punctuation, letters): walks end sooner. */
const SHORT = 512;

/** mulberry32: a small seeded generator, so a failing walk can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe.skipIf(!hasModel("q4"))("outputs sampled through the matcher validate (Ajv)", () => {
  let backend: GrammarBackend;
  let decode: (ids: number[]) => string;
  beforeAll(async () => {
    const d = await grammarDriver();
    backend = d.backend;
    const { loadTransformersTokenizer } = await import("../../src/core/runner/tokenizer.ts");
    const { MODEL_DIR } = await import("../runner/model-fixture.ts");
    const tok = await loadTransformersTokenizer(MODEL_DIR);
    decode = (ids) => tok.decode(ids, { skip_special_tokens: true });
  });

  /** One walk: the text, or undefined when it did not end within MAX_STEPS. */
  async function walk(c: StructuredConstraint, next: () => number): Promise<string | undefined> {
    const [m] = await backend.constraints(c, 1);
    const mask = new Uint32Array(VOCAB / 32);
    const ids: number[] = [];
    try {
      for (let step = 0; step < MAX_STEPS; step++) {
        mask.fill(0);
        await m!.fillMask(mask);
        const allowed: number[] = [];
        for (let id = 0; id < VOCAB; id++) if ((mask[id >>> 5]! >>> (id & 31)) & 1) allowed.push(id);
        if (allowed.includes(EOS) && next() < 0.5) return decode(ids);
        const pool = allowed.filter((id) => id !== EOS);
        if (pool.length === 0) return allowed.includes(EOS) ? decode(ids) : undefined;
        const short = pool.filter((id) => id < SHORT);
        const from = short.length > 0 && next() < 0.8 ? short : pool;
        const id = from[Math.floor(next() * from.length)]!;
        expect(m!.accept(id)).toBe(true);
        ids.push(id);
      }
      return undefined;
    } finally {
      m!.release();
    }
  }

  const ajv = new Ajv2020({ strict: false, validateSchema: false, logger: false });
  addFormats.default(ajv);
  let ended = 0;

  for (const k of KEYWORD_CASES) {
    // Ajv here reads 2020-12 only; the draft-4 case is covered by its instances in matcher.test.ts.
    if (k.refuses || k.schema === true || k.name.startsWith("draft-4")) continue;
    it(`walks under ${k.name} validate`, async () => {
      const c: StructuredConstraint = {
        kind: "json_schema",
        schema: JSON.stringify(k.schema),
        anyWhitespace: false,
      };
      checkSupported(c);
      const validate = ajv.compile(k.schema as object);
      const next = random(k.name.length * 7919 + 1);
      for (let i = 0; i < WALKS; i++) {
        const text = await walk(c, next);
        if (text === undefined) continue;
        // Debt: the backend matches a string's characters byte by byte without checking UTF-8
        // (an overlong or truncated sequence passes as one character), so a walk through lone
        // byte tokens can end in text that is not UTF-8; such walks are not judged here.
        if (text.includes("\uFFFD")) continue;
        ended++;
        const value = JSON.parse(text);
        expect(validate(value), `${text}: ${JSON.stringify(validate.errors)}`).toBe(true);
      }
    });
  }

  it("most walks end", () => {
    expect(ended).toBeGreaterThan(WALKS * 10);
  });
});
