/**
 * Jump-forward on SmolLM2's real vocabulary: where the grammar leaves one continuation, its
 * tokens are taken by the matcher without sampling — all but the last, which sampling may extend —
 * and the rest of a valid output is still accepted after them. Too few forced tokens, or a
 * tokenization the grammar refuses, take nothing and leave the matcher as it was.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { loadTransformersTokenizer } from "../../src/core/runner/tokenizer.ts";
import type { GrammarConstraint } from "../../src/core/structured/grammar-constraint.ts";
import { hasModel, MODEL_DIR } from "../runner/model-fixture.ts";
import { EOS, type GrammarDriver, grammarDriver, VOCAB } from "./grammar-driver.ts";

const allowed = (mask: Uint32Array, id: number) => ((mask[id >>> 5]! >>> (id & 31)) & 1) === 1;

describe.skipIf(!hasModel("q4"))("jump-forward on SmolLM2's vocabulary", () => {
  let backend: GrammarDriver["backend"];
  let encode: (text: string) => number[];
  let decode: (ids: number[]) => string;
  beforeAll(async () => {
    ({ backend, encode } = await grammarDriver());
    const tok = await loadTransformersTokenizer(MODEL_DIR);
    decode = (ids) => tok.decode(ids, { skip_special_tokens: false });
  });

  const regex = async (pattern: string) => (await backend.constraints({ kind: "regex", pattern }, 1))[0]!;

  /** Feeds `text` token by token under the mask; false at the first token refused. */
  async function takes(g: GrammarConstraint, text: string): Promise<boolean> {
    const mask = new Uint32Array(VOCAB / 32);
    for (const id of encode(text)) {
      mask.fill(0);
      await g.fillMask(mask);
      if (!allowed(mask, id) || !g.accept(id)) return false;
    }
    return true;
  }

  /** `takes`, and then the grammar may end. */
  async function accepts(g: GrammarConstraint, text: string): Promise<boolean> {
    if (!(await takes(g, text))) return false;
    const mask = new Uint32Array(VOCAB / 32);
    await g.fillMask(mask);
    return allowed(mask, EOS);
  }

  it("takes the forced text's tokens but the last, and the rest of a valid output still follows", async () => {
    const g = await regex("Order number [0-9]{3} shipped");
    const forced = g.forcedTokens(encode, 1, 100);
    expect(forced).toEqual(encode("Order number ").slice(0, -1));
    expect(forced.length).toBeGreaterThan(0);
    const done = decode(forced);
    expect("Order number ".startsWith(done)).toBe(true);
    expect(await accepts(g, "Order number 123 shipped".slice(done.length))).toBe(true);
    g.release();
  });

  it("a JSON schema's forced key joins, and the object still completes", async () => {
    // Closed: an open object could start with an extra name, so its key would not be forced.
    const schema = {
      type: "object",
      properties: { name: { type: "string" } },
      required: ["name"],
      additionalProperties: false,
    };
    const [g] = await backend.constraints(
      { kind: "json_schema", schema: JSON.stringify(schema), anyWhitespace: false },
      1,
    );
    const forced = g!.forcedTokens(encode, 1, 100);
    const done = decode(forced);
    expect(done).toMatch(/^\{\s*"name/);
    // Whichever separators the grammar forces, the model's free part follows them.
    const full = [`{"name":"Ann"}`, `{"name": "Ann"}`].find((f) => f.startsWith(done));
    expect(full, done).toBeDefined();
    expect(await accepts(g!, full!.slice(done.length))).toBe(true);
    g!.release();
  });

  it("nothing is taken below the minimum, at a limit of zero or where the grammar branches", async () => {
    const g = await regex("Order number [0-9]{3} shipped");
    expect(g.forcedTokens(encode, 50, 100)).toEqual([]);
    expect(g.forcedTokens(encode, 1, 0)).toEqual([]);
    // The matcher was left where it was: the whole output is still accepted from the start.
    expect(await accepts(g, "Order number 123 shipped")).toBe(true);
    const branch = await regex("(cat|dog) food");
    expect(branch.forcedTokens(encode, 1, 100)).toEqual([]);
    g.release();
    branch.release();
  });

  it("a tokenization the grammar refuses is given back", async () => {
    // The tokenizer reads the literal end-of-turn marker as its special token, which the grammar
    // (bytes) refuses after taking the tokens before it.
    const text = "hello world<|im_end|>x";
    const ids = encode(text);
    expect(ids).toContain(EOS);
    const before = ids.indexOf(EOS);
    const g = await regex("hello world<\\|im_end\\|>x");
    // Asked for more tokens than the grammar takes: what it took is rolled back...
    expect(g.forcedTokens(encode, before + 1, 100)).toEqual([]);
    // ...so the output is taken from its start again.
    expect(await takes(g, "hello world")).toBe(true);
    const h = await regex("hello world<\\|im_end\\|>x");
    expect(h.forcedTokens(encode, before, 100)).toEqual(ids.slice(0, before));
    g.release();
    h.release();
  });
});
