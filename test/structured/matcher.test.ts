/**
 * The fail-closed checker and the backend's matcher, driven token by token with SmolLM2's real
 * tokenizer: for every keyword and regex feature the checker allows, valid instances are never
 * masked out (and may end), and every violating instance is rejected at some step. Features the
 * checker refuses are refused by name.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import { beforeAll, describe, expect, it } from "vitest";
import { checkSupported } from "../../src/core/structured/check-constraint.ts";
import { jsonWhitespace, type StructuredConstraint } from "../../src/core/structured/constraint-spec.ts";
import { GrammarBackend } from "../../src/core/structured/grammar-backend.ts";
import { readGrammarVocabulary } from "../../src/core/structured/vocabulary.ts";
import { structuredConstraint } from "../../src/protocol/structured-outputs.ts";
import { hasModel, MODEL_DIR } from "../runner/model-fixture.ts";
import { EOS, type GrammarDriver, grammarDriver, VOCAB } from "./grammar-driver.ts";
import { KEYWORD_CASES, REGEX_CASES } from "./keyword-cases.ts";

describe.skipIf(!hasModel("q4"))("structured-output matcher on SmolLM2's vocabulary", () => {
  let backend: GrammarBackend;
  let encode: (text: string) => number[];
  let drive: GrammarDriver["drive"];
  beforeAll(async () => {
    ({ backend, encode, drive } = await grammarDriver());
  });

  const allowed = (mask: Uint32Array, id: number) => ((mask[id >>> 5]! >>> (id & 31)) & 1) === 1;

  for (const k of KEYWORD_CASES) {
    const c: StructuredConstraint = {
      kind: "json_schema",
      schema: JSON.stringify(k.schema),
      anyWhitespace: true,
    };
    if (k.refuses) {
      it(`refuses ${k.name}`, () => {
        expect(() => checkSupported(c)).toThrow(k.refuses);
      });
      continue;
    }
    it(`enforces ${k.name}`, async () => {
      checkSupported(c);
      for (const v of k.valid) expect(await drive(c, JSON.stringify(v)), JSON.stringify(v)).toBe("accepted");
      for (const v of k.invalid)
        expect(await drive(c, JSON.stringify(v)), JSON.stringify(v)).not.toBe("accepted");
      for (const t of k.invalidTexts ?? []) {
        expect(() => JSON.parse(t), t).toThrow();
        expect(await drive(c, t), t).not.toBe("accepted");
      }
      for (const { text, accepted } of k.spellings ?? []) {
        if (accepted) expect(k.valid, text).toContainEqual(JSON.parse(text));
        if (accepted) expect(await drive(c, text), text).toBe("accepted");
        else expect(await drive(c, text), text).not.toBe("accepted");
      }
    });
  }

  for (const r of REGEX_CASES) {
    const c: StructuredConstraint = { kind: "regex", pattern: r.pattern };
    if (r.refuses) {
      it(`refuses the regex ${r.pattern}`, () => {
        expect(() => checkSupported(c)).toThrow(r.refuses);
      });
      continue;
    }
    it(`enforces the regex ${r.pattern}`, async () => {
      const js = new RegExp(`^(?:${r.pattern})$`, "u");
      for (const v of r.valid) {
        expect(js.test(v)).toBe(true);
        expect(await drive(c, v), v).toBe("accepted");
      }
      for (const v of r.invalid) {
        expect(js.test(v)).toBe(false);
        expect(await drive(c, v), v).not.toBe("accepted");
      }
    });
  }

  it("choice: exactly the choices, quotes and newlines included", async () => {
    const c: StructuredConstraint = { kind: "choice", choices: ['say "hi"', "a\nb", "yes", "café \\ 東京"] };
    for (const v of c.choices) expect(await drive(c, v)).toBe("accepted");
    for (const v of ["say hi", "a", "yesyes", "ye"]) expect(await drive(c, v)).not.toBe("accepted");
  });

  it("grammar (EBNF / GBNF): enforced, and a bad grammar is a RequestError naming the rule", async () => {
    const c: StructuredConstraint = { kind: "grammar", grammar: 'root ::= "x" [0-9]+ ("," [0-9]+)*' };
    expect(await drive(c, "x1,22")).toBe("accepted");
    for (const v of ["x", "x1,", "y1"]) expect(await drive(c, v)).not.toBe("accepted");
    await expect(backend.compile({ kind: "grammar", grammar: "root ::= foo" })).rejects.toThrow(/foo/);
    // The backend still serves after a refused grammar.
    expect(await drive(c, "x7")).toBe("accepted");
  });

  it("structural_tag: the tagged JSON is enforced, its schema checked like any other", async () => {
    const tag = (schema: unknown): StructuredConstraint => ({
      kind: "structural_tag",
      structuralTag: JSON.stringify({
        type: "structural_tag",
        format: {
          type: "tag",
          begin: "<r>",
          content: { type: "json_schema", json_schema: schema },
          end: "</r>",
        },
      }),
    });
    const c = tag({ type: "object", properties: { x: { type: "integer" } }, required: ["x"] });
    expect(await drive(c, '<r>{"x": 1}</r>')).toBe("accepted");
    for (const v of ['<r>{"x": "s"}</r>', '{"x": 1}', '<r>{"x": 1}'])
      expect(await drive(c, v)).not.toBe("accepted");
    expect(() => checkSupported(tag({ type: "integer", not: { const: 1 } }))).toThrow(/not/);
  });

  it("open objects: an extra property never repeats a declared name, in any spelling", async () => {
    const schema = {
      type: "object",
      properties: { a: { type: "integer" }, ab: { type: "string" } },
      additionalProperties: { type: "integer" },
    };
    const c: StructuredConstraint = {
      kind: "json_schema",
      schema: JSON.stringify(schema),
      anyWhitespace: true,
    };
    const validate = new Ajv2020({ strict: false }).compile(schema);
    for (const t of [
      '{"a": 1, "abc": 2, "b": 3}',
      '{"ab": "x", "": 1}',
      '{"x": 1, "x": 2}',
      '{"a": 1, "a": 2}',
    ])
      expect(await drive(c, t), t).toBe("accepted");
    // JSON.parse keeps the last of repeated names: each of these parses to a value the schema
    // forbids (or spells a declared name through an escape, which extra names never use).
    for (const t of [
      '{"a": 1, "a": "x"}',
      '{"ab": "x", "ab": 1}',
      '{"a": "x"}',
      '{"\\u0061": "x"}',
      '{"a\\u0062": 1}',
      '{"x": 1, "a": "x"}',
    ]) {
      expect(validate(JSON.parse(t)), t).toBe(false);
      expect(await drive(c, t), t).not.toBe("accepted");
    }
  });

  it("objects the schema leaves open: open by default, closed by disable_additional_properties and strict", async () => {
    const inner = { type: "object", properties: { b: { type: "boolean" } } };
    const schema = { type: "object", properties: { a: { type: "integer" }, in: inner }, required: ["a"] };
    // The request fields as the protocol layer reads them (absent fields undefined).
    type Outputs = Parameters<typeof structuredConstraint>[0];
    type Format = Parameters<typeof structuredConstraint>[1];
    const outputs = (o: object) => jsonWhitespace(structuredConstraint(o as Outputs, undefined)!, false);
    const format = (strict?: boolean) =>
      jsonWhitespace(
        structuredConstraint(undefined, {
          type: "json_schema",
          json_schema: { name: "x", description: undefined, schema, strict },
        } as Format)!,
        false,
      );
    const open = [outputs({ json: schema }), format(), format(false)];
    const closed = [outputs({ json: schema, disable_additional_properties: true }), format(true)];
    const declared = ['{"a": 1}', '{"in": {"b": true}, "a": 2}'];
    const extra = ['{"a": 1, "c": 2}', '{"c": "x", "a": 1}', '{"a": 1, "in": {"b": true, "d": null}}'];
    const validate = new Ajv2020({ strict: false }).compile(schema);
    for (const t of [...declared, ...extra]) expect(validate(JSON.parse(t)), t).toBe(true);
    for (const c of open) {
      checkSupported(c);
      for (const t of [...declared, ...extra]) expect(await drive(c, t), t).toBe("accepted");
    }
    for (const c of closed) {
      checkSupported(c);
      for (const t of declared) expect(await drive(c, t), t).toBe("accepted");
      for (const t of extra) expect(await drive(c, t), t).not.toBe("accepted");
    }
  });

  it("json_object: any object, nothing else", async () => {
    const c: StructuredConstraint = { kind: "json_object", anyWhitespace: true };
    expect(await drive(c, '{"a": [1, {"b": null}], "c": "d"}')).toBe("accepted");
    for (const v of ["[]", "1", '"x"', "{"]) expect(await drive(c, v)).not.toBe("accepted");
  });

  it("disable_any_whitespace: compact JSON only", async () => {
    const schema = JSON.stringify({
      type: "object",
      properties: { a: { type: "integer" } },
      required: ["a"],
    });
    const compact: StructuredConstraint = { kind: "json_schema", schema, anyWhitespace: false };
    expect(await drive(compact, '{"a":1}')).toBe("accepted");
    expect(await drive(compact, '{"a": 1}')).not.toBe("accepted");
    expect(await drive({ ...compact, anyWhitespace: true }, '{ "a" : 1 }')).toBe("accepted");
  });

  it("special tokens never appear inside a constrained output", async () => {
    const [m] = await backend.constraints(
      { kind: "json_schema", schema: '{"type":"string"}', anyWhitespace: true },
      1,
    );
    const mask = new Uint32Array(VOCAB / 32);
    m!.accept(encode('"')[0]!);
    await m!.fillMask(mask);
    for (let id = 0; id <= 16; id++) expect(allowed(mask, id), `token ${id}`).toBe(false);
    m!.release();
  });

  it("compiled grammars are cached per constraint and bounded", async () => {
    const small = new GrammarBackend(readGrammarVocabulary(MODEL_DIR, VOCAB, [EOS]), { cacheSize: 2 });
    const c = (s: string): StructuredConstraint => ({ kind: "choice", choices: [s] });
    const first = await small.compile(c("a"));
    expect((await small.compile(c("a"))).compiled).toBe(first.compiled);
    await small.compile(c("b"));
    await small.compile(c("c"));
    expect(small.cachedGrammars).toBe(2);
    expect((await small.compile(c("a"))).compiled).not.toBe(first.compiled);
  });

  it("makes matchers for concurrent requests while their grammars are compiled and evicted", async () => {
    // 16 requests of one constraint at once (a completions prompt list), then requests of more
    // constraints than the cache holds: no grammar is disposed under a call making its matchers.
    const small = new GrammarBackend(readGrammarVocabulary(MODEL_DIR, VOCAB, [EOS]), { cacheSize: 2 });
    const c = (s: string): StructuredConstraint => ({ kind: "choice", choices: [s] });
    const same = await Promise.all(Array.from({ length: 16 }, () => small.constraints(c(""), 1)));
    expect(same.flat()).toHaveLength(16);
    const mixed = await Promise.all(
      Array.from({ length: 24 }, (_, i) => small.constraints(c(`x${i % 6}`), 2)),
    );
    expect(mixed.flat()).toHaveLength(48);
    expect(small.cachedGrammars).toBeLessThanOrEqual(2);
  });
});
