/**
 * JSON Schema experiments: for each keyword, a schema with instances that satisfy it and instances
 * that violate it. Keywords the fail-closed checker allows must have every violating instance
 * rejected by the backend's matcher; the others must be refused by the checker.
 */
export interface KeywordCase {
  name: string;
  schema: unknown;
  valid: unknown[];
  invalid: unknown[];
  /** Raw texts the grammar must refuse though no instance stands for them (not JSON at all). */
  invalidTexts?: string[];
  /**
   * Other JSON spellings of instances (escapes JSON.stringify does not write): accepted ones spell
   * one of `valid`; refused ones are spellings the grammar does not generate, or violations.
   */
  spellings?: { text: string; accepted: boolean }[];
  /** The checker refuses this schema (and names `refuses`). */
  refuses?: string;
}

export const KEYWORD_CASES: KeywordCase[] = [
  { name: "type", schema: { type: "string" }, valid: ["a"], invalid: [1, null, {}] },
  { name: "type list", schema: { type: ["string", "null"] }, valid: ["a", null], invalid: [1, []] },
  { name: "enum", schema: { enum: ["a", 1, null] }, valid: ["a", 1, null], invalid: ["b", 2, true] },
  {
    name: "const",
    schema: { const: { a: [1] } },
    valid: [{ a: [1] }],
    invalid: [{ a: [2] }, { a: [1], b: 1 }],
  },
  {
    name: "properties, required",
    schema: {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "string" } },
      required: ["a"],
    },
    valid: [{ a: 1 }, { a: 1, b: "x" }, { a: 1, c: 2 }],
    invalid: [{}, { a: "x" }, { b: "x" }, { a: 1, b: 2 }, []],
  },
  {
    name: "const, enum and property names with a solidus, in either spelling",
    schema: {
      type: "object",
      properties: {
        method: { const: "notifications/cancelled" },
        api: { enum: ["apps/v1", "rbac.authorization.k8s.io/v1"] },
        "a/b": { type: "integer" },
      },
      required: ["method", "api"],
      additionalProperties: false,
    },
    valid: [
      { method: "notifications/cancelled", api: "apps/v1" },
      { method: "notifications/cancelled", api: "rbac.authorization.k8s.io/v1", "a/b": 1 },
      { method: "notifications/cancelled", api: "apps/v1", "a/b": 1 },
    ],
    invalid: [
      { method: "notifications\\/cancelled", api: "apps/v1" },
      { method: "notifications/", api: "apps/v1" },
      { method: "notifications/cancelled", api: "apps/v2" },
      { method: "notifications/cancelled", api: "apps/v1", "a/b": "x" },
      { method: "notifications/cancelled", api: "apps/v1", "a\\/b": 1 },
    ],
    spellings: [
      { text: '{"method":"notifications\\/cancelled","api":"apps\\/v1"}', accepted: true },
      { text: '{"method":"notifications/cancelled","api":"apps\\/v1","a/b":1}', accepted: true },
      // Names of an object taken in any order are spelled as JSON.stringify writes them.
      { text: '{"method":"notifications/cancelled","api":"apps/v1","a\\/b":1}', accepted: false },
      { text: '{"method":"notifications\\/cancelled","api":"apps/v1","a/b":"x"}', accepted: false },
    ],
  },
  {
    name: "an object of any names and values",
    schema: { type: "object", properties: { d: { type: ["object", "null"] } }, required: ["d"] },
    valid: [{ d: {} }, { d: { raw: "x", n: [1, { a: null }], "a b": "\n" } }, { d: null }],
    invalid: [{ d: [] }, { d: "x" }, { d: 1 }, {}],
  },
  {
    name: "additionalItems beside items that is a schema: nothing asserted",
    schema: { type: "array", items: { type: "integer" }, additionalItems: false },
    valid: [[], [1, 2, 3]],
    invalid: [["x"], [1, "x"], {}],
  },
  {
    name: "properties without type",
    schema: { properties: { a: { type: "integer" } }, required: ["a"] },
    valid: [{ a: 1 }],
    invalid: [{ a: "x" }, {}],
  },
  {
    name: "additionalProperties schema",
    schema: { type: "object", additionalProperties: { type: "integer" } },
    valid: [{ x: 1 }, {}],
    invalid: [{ x: "s" }],
  },
  {
    name: "additionalProperties beside properties",
    schema: { type: "object", properties: { a: { type: "integer" } }, additionalProperties: true },
    valid: [{ a: 1 }, { a: 1, b: "x" }, { b: [1, { a: "x" }] }, {}],
    invalid: [{ a: "x" }, { b: 1, a: "x" }, []],
  },
  {
    name: "properties without additionalProperties: extra properties of any value",
    schema: {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "string" } },
      required: ["b"],
    },
    valid: [{ b: "x" }, { a: 1, b: "x", c: null }, { b: "x", "": 1, aa: "s", bb: 2 }, { c: 1, b: "x", a: 1 }],
    invalid: [{ a: 1 }, { a: "x", b: "x" }, { b: 1 }, { c: 1, a: 1 }, { b: "x", c: 1, a: "x" }],
  },
  {
    name: "properties in any order, required names tracked",
    schema: {
      type: "object",
      properties: {
        a: { type: "integer" },
        b: { type: "string" },
        c: { type: "null" },
        d: { type: "boolean" },
      },
      required: ["a", "c", "d"],
      additionalProperties: false,
    },
    valid: [
      { a: 1, c: null, d: true },
      { d: false, c: null, a: 2 },
      { c: null, b: "x", a: 3, d: true },
    ],
    invalid: [
      { d: true, c: null },
      { c: null, a: 1 },
      { d: true, b: "x", a: 1 },
      { c: null, a: 1, d: true, e: 1 },
      {},
    ],
  },
  {
    name: "closed, every property required: declared order",
    schema: {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "string" } },
      required: ["a", "b"],
      additionalProperties: false,
    },
    valid: [{ a: 1, b: "x" }],
    // Narrowed: declared order ({b: "x", a: 1} is valid), as OpenAI's strict mode writes it.
    invalid: [{ b: "x", a: 1 }, { a: 1 }, { a: 1, b: "x", c: 1 }, { a: "1", b: "x" }],
  },
  {
    name: "a $ref into an object's properties: that object in declared order",
    schema: {
      type: "object",
      properties: { a: { type: "integer" }, b: { $ref: "#/properties/a" } },
      required: ["a"],
    },
    valid: [
      { a: 1, b: 2 },
      { a: 1, z: "x" },
    ],
    // Narrowed: declared order, extra properties after the declared ones.
    invalid: [{ a: 1, b: "x" }, { b: 2 }, { b: 2, a: 1 }],
  },
  {
    name: "properties beside enum: the enum",
    schema: {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "integer" } },
      enum: [{ a: 1, b: 2 }, { b: 3 }],
    },
    valid: [{ a: 1, b: 2 }, { b: 3 }],
    // Narrowed: the enum's values as written ({b: 2, a: 1} is valid).
    invalid: [{ a: 1 }, { b: 4 }, { b: 2, a: 1 }],
  },
  {
    name: "properties beside another type: that type too",
    schema: { type: ["object", "string"], properties: { a: { type: "integer" }, b: { type: "integer" } } },
    valid: [{ a: 1, b: 2 }, "x"],
    // Narrowed: declared order.
    invalid: [{ a: "x" }, 1, { b: 2, a: 1 }],
  },
  {
    name: "more required names than tracked: declared order",
    schema: {
      type: "object",
      properties: {
        a: { type: "integer" },
        b: { type: "integer" },
        c: { type: "integer" },
        d: { type: "integer" },
        e: { type: "integer" },
        g: { type: "integer" },
      },
      required: ["a", "b", "c", "d", "e", "g"],
    },
    valid: [
      { a: 1, b: 2, c: 3, d: 4, e: 5, g: 7 },
      { a: 1, b: 2, c: 3, d: 4, e: 5, g: 7, f: 6 },
    ],
    // Narrowed: six required names keep the declared order.
    invalid: [
      { a: 1, b: 2, c: 3, d: 4, e: 5 },
      { a: 1, b: "2", c: 3, d: 4, e: 5, g: 7 },
      { b: 2, a: 1, c: 3, d: 4, e: 5, g: 7 },
    ],
  },
  {
    name: "properties without type, in any order",
    schema: {
      properties: { a: { type: "integer" }, b: { type: "string" }, c: { type: "boolean" } },
      required: ["a", "b"],
      additionalProperties: false,
    },
    valid: [
      { a: 1, b: "x" },
      { b: "x", a: 1 },
      { c: true, b: "x", a: 1 },
    ],
    invalid: [{ a: 1 }, { b: "x", a: "1" }, { a: 1, b: "x", d: 1 }],
  },
  {
    name: "five required names in any order",
    schema: {
      type: "object",
      properties: {
        doc: { type: "string" },
        id: { type: "integer" },
        name: { type: "string" },
        since: { type: "integer" },
        request: { type: "object" },
        response: { type: "object" },
      },
      required: ["name", "since", "doc", "request", "response"],
      additionalProperties: false,
    },
    valid: [
      { doc: "d", name: "n", request: {}, response: {}, since: 1 },
      { id: 1, name: "n", since: 2, doc: "d", request: {}, response: { a: 1 } },
    ],
    invalid: [
      { id: 1, name: "n", since: 2, doc: "d", request: {} },
      { name: "n", since: 2, doc: "d", request: {}, response: {}, x: 1 },
      { name: "n", since: "2", doc: "d", request: {}, response: {} },
    ],
  },
  {
    name: "additionalProperties schema beside properties",
    schema: {
      type: "object",
      properties: { a: { type: "string" }, ab: { type: "integer" } },
      required: ["a"],
      additionalProperties: { type: "integer" },
    },
    valid: [{ a: "x" }, { a: "x", b: 1 }, { a: "x", ab: 2, abc: 3, "": 4, A: 5 }],
    invalid: [{ a: "x", b: "y" }, { a: "x", ab: "y" }, { a: "x", abc: "y" }, { a: 1 }, { b: 1 }],
  },
  {
    name: "open objects nested through $ref and items",
    schema: {
      $defs: {
        node: {
          type: "object",
          properties: { v: { type: "integer" }, kids: { type: "array", items: { $ref: "#/$defs/node" } } },
          required: ["v"],
        },
      },
      $ref: "#/$defs/node",
    },
    valid: [{ v: 1, kids: [{ v: 2, note: "x" }], note: true }],
    invalid: [
      { v: 1, kids: [{ v: "2" }] },
      { v: 1, kids: [{ w: 2 }] },
    ],
  },
  {
    name: "properties beside minProperties: closed",
    schema: { type: "object", properties: { a: { type: "integer" } }, minProperties: 1 },
    // Narrowed: a count of properties keeps the object closed (extra properties not generated).
    valid: [{ a: 1 }],
    invalid: [{}, { a: "x" }],
  },
  {
    name: "a declared name outside printable ASCII: closed",
    schema: { type: "object", properties: { é: { type: "integer" }, a: { type: "integer" } } },
    valid: [{ é: 1 }, { a: 1 }],
    // Narrowed: extra properties are not generated.
    invalid: [{ é: "x" }, { é: 1, a: "x" }, { é: 1, z: 1 }],
  },
  {
    name: "items",
    schema: { type: "array", items: { type: "integer" } },
    valid: [[], [1, 2]],
    invalid: [["a"], [1, null]],
  },
  {
    name: "prefixItems",
    schema: { type: "array", prefixItems: [{ type: "integer" }, { type: "string" }], items: false },
    valid: [[1, "a"]],
    invalid: [["a", 1]],
    refuses: "the schema false",
  },
  {
    name: "minItems, maxItems",
    schema: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 2 },
    valid: [[1], [1, 2]],
    invalid: [[], [1, 2, 3]],
  },
  {
    name: "array bounds without items: items of any kind",
    schema: { type: "array", prefixItems: [{ type: "integer" }], maxItems: 3 },
    valid: [[1], [1, "x", { a: [] }]],
    // Narrowed: every prefix item is present ([] is valid).
    invalid: [["x"], [1, 2, 3, 4], {}, []],
  },
  {
    name: "minLength, maxLength",
    schema: { type: "string", minLength: 2, maxLength: 3 },
    // Lengths count code points, as JSON Schema does.
    valid: ["ab", "abc", "éé", "🐉🐉🐉"],
    invalid: ["a", "abcd", "", "🐉🐉🐉🐉", "🐉"],
    invalidTexts: ['"a\tb"', '"a\u0001"'],
  },
  {
    name: "minLength alone",
    schema: { type: "object", properties: { s: { type: "string", minLength: 40 } }, required: ["s"] },
    valid: [{ s: "x".repeat(40) }, { s: "long enough, with spaces and punctuation." }],
    invalid: [{ s: "x".repeat(39) }, { s: "" }],
    invalidTexts: [`{"s":"${"x".repeat(38)}\t\u0001"}`],
  },
  {
    name: "minLength alone, escapes as characters",
    schema: { type: "string", minLength: 2 },
    valid: ["a\nb", '"q"', "\\\\", "ab", "éé", "éx", "a/"],
    invalid: ["a", "\n", "", "🐉"],
    spellings: [
      { text: '"\\u00e9x"', accepted: true },
      { text: '"a\\/"', accepted: true },
      // One code point written as two escapes (a surrogate pair): not generated, whatever its length.
      { text: '"\\ud83d\\ude00"', accepted: false },
      { text: '"\\u00e9"', accepted: false },
    ],
    invalidTexts: ['"a\\qb"', '"\\u12"'],
  },
  {
    name: "maxLength with a type list",
    schema: { type: ["string", "null"], maxLength: 2 },
    valid: ["ab", null, ""],
    invalid: ["abc", 1],
    invalidTexts: ['"\t"'],
  },
  {
    name: "long maxLength, several strings sharing the length rules",
    schema: {
      type: "object",
      properties: {
        a: { type: "string", maxLength: 3 },
        b: { type: "string", maxLength: 300 },
        c: { type: "string", minLength: 130, maxLength: 200 },
        d: { type: ["string", "null"], maxLength: 3, description: "an annotation beside" },
        e: { type: "string", minLength: 1, maxLength: 128, _format: "an unknown keyword beside" },
        f: { type: "string", maxLength: 400 },
      },
      additionalProperties: false,
    },
    valid: [
      { a: "abc", b: "x".repeat(300), d: null },
      { b: "", c: "y".repeat(130), e: "z".repeat(128) },
      { c: "🐉".repeat(200), b: "ab ".repeat(43), d: "abc" },
      { b: "q".repeat(127), e: "w" },
      { b: "q".repeat(128) },
      { b: "q".repeat(255) },
      { b: "q".repeat(256), f: "r".repeat(400) },
      { f: "r".repeat(127) },
      { f: "r".repeat(128) },
      { f: "r".repeat(272) },
    ],
    invalid: [
      { a: "abcd" },
      { b: "x".repeat(301) },
      { c: "y".repeat(129) },
      { c: "y".repeat(201) },
      { d: "abcd" },
      { e: "" },
      { e: "z".repeat(129) },
      { f: "r".repeat(401) },
    ],
    invalidTexts: [`{"b":"${"x".repeat(200)}\t"}`],
  },
  {
    name: "minLength greater than maxLength",
    schema: { type: "string", minLength: 3, maxLength: 2 },
    valid: [],
    invalid: ["ab", "abc"],
    refuses: "minLength greater than maxLength",
  },
  { name: "pattern", schema: { type: "string", pattern: "^[a-c]+$" }, valid: ["abc"], invalid: ["abd", ""] },
  {
    name: "pattern with .",
    schema: { type: "string", pattern: "^a.c$" },
    valid: ["abc", "a.c"],
    invalid: ["a\nc", "ac", 'a"c'],
  },
  {
    name: "pattern without anchors: searched for, as JSON Schema reads it",
    schema: { type: "string", pattern: "[0-9]{3}" },
    valid: ["123", "a123b", "ver 1234"],
    invalid: ["12", "1a2b3", ""],
  },
  {
    name: "pattern anchored at one end",
    schema: {
      type: "object",
      properties: { s: { type: "string", pattern: "^dag" }, e: { type: "string", pattern: "\\.json$" } },
    },
    valid: [{ s: "dag" }, { s: "dag_01", e: "a.json" }, { e: ".json" }],
    invalid: [{ s: "xdag" }, { s: "da" }, { e: "a.jsonl" }, { e: "ajson" }],
  },
  {
    name: "pattern with alternatives anchored apart",
    schema: { type: "string", pattern: "^a|c|b$" },
    valid: ["a", "ax", "xb", "b", "xcx", "c"],
    invalid: ["xa", "bx", "", "x"],
    // The alternatives stay inside the quotes.
    invalidTexts: ['"a', 'b"', '"x'],
  },
  {
    name: "pattern with negated classes and \\S",
    schema: { type: "string", pattern: "^[^:\\s]+:\\S+$" },
    valid: ["ab:cd"],
    invalid: ["a b:c", "a:b c", "a:b:c d", 'a:"', "a:b\\"],
  },
  {
    name: "a pattern property beside additionalProperties false",
    schema: {
      type: "object",
      properties: { t: { type: "string", pattern: "^[^:]+(:[^\\s]+)?$" }, u: { type: "string" } },
      additionalProperties: false,
    },
    valid: [{ t: "a:b", u: "x" }],
    invalid: [{ t: "a:b", u: "x", extra: "y" }, { t: "a: b" }],
  },
  {
    name: "pattern beside maxLength",
    schema: { type: "string", pattern: "^[a-z]+$", maxLength: 3 },
    valid: ["abc"],
    invalid: ["abcd"],
    refuses: "pattern beside maxLength",
  },
  {
    name: "pattern with a quote",
    schema: { type: "string", pattern: '^a"b$' },
    valid: [],
    invalid: [],
    refuses: "must escape",
  },
  {
    name: "pattern with a lookahead",
    schema: { type: "string", pattern: "^(?!x)[a-z]+$" },
    valid: ["a"],
    invalid: ["x"],
    refuses: "lookahead",
  },
  {
    name: "minimum 0 (integer)",
    schema: { type: "integer", minimum: 0 },
    valid: [0, 7, 1234],
    invalid: [-1, -10, -1000],
  },
  {
    name: "minimum 1 (integer)",
    schema: { type: "integer", minimum: 1 },
    valid: [1, 10, 99],
    invalid: [0, -1, -20],
  },
  {
    name: "minimum 2 (integer)",
    schema: { type: "integer", minimum: 2 },
    valid: [2, 9, 10, 12345],
    invalid: [1, 0, -2],
    invalidTexts: ["02", "1 1"],
  },
  {
    name: "minimum, maximum (integer)",
    schema: { type: "integer", minimum: -3, maximum: 120 },
    valid: [-3, -1, 0, 9, 10, 99, 119, 120],
    invalid: [-4, -30, 121, 129, 200, 1000, 1.5],
  },
  {
    name: "maximum below zero (integer)",
    schema: { type: "integer", maximum: -9 },
    valid: [-9, -10, -123],
    invalid: [-8, -1, 0, 9],
  },
  {
    name: "minimum, maximum far apart (integer)",
    schema: { type: "integer", minimum: 17, maximum: 40321 },
    valid: [17, 19, 20, 99, 100, 999, 40321, 40299, 39999],
    invalid: [16, 9, 40322, 40400, 41000, 99999, 100000],
  },
  {
    name: "minimum with an integer or null",
    schema: { type: ["integer", "null"], minimum: 5 },
    valid: [5, null, 50],
    invalid: [4, "x"],
  },
  {
    name: "minimum (number)",
    schema: { type: "number", minimum: 1.5 },
    valid: [2, 2.5, 1000.25, 1.5, 1.75, 1.500001],
    invalid: [1.4, 1, 0.5, -2, 1.49999],
  },
  {
    name: "bounds inside integer parts (number)",
    schema: { type: "number", minimum: 1e-6, maximum: 1 },
    valid: [0.2, 0.000001, 1, 0.5, 0.0000010001],
    invalid: [0, 0.0000009, 1.5, -0.2, 1.0000001],
    spellings: [{ text: "0.0000010", accepted: true }],
  },
  {
    name: "negative bounds inside integer parts (number)",
    schema: { type: "number", minimum: -2.25, maximum: -0.5 },
    valid: [-2.25, -1, -0.5, -0.75, -2.2, -2],
    invalid: [-2.26, -0.49, 0, -3, 1],
  },
  {
    name: "exclusiveMinimum 0 (number)",
    schema: { type: "number", exclusiveMinimum: 0 },
    valid: [0.2, 1, 2.5, 0.000001],
    invalid: [0, -0.5, -1],
    spellings: [
      { text: "0.0", accepted: false },
      { text: "-0.0", accepted: false },
    ],
  },
  {
    name: "exclusiveMaximum 1 (number): no decimal that rounds onto the bound",
    schema: { type: "number", minimum: 0, exclusiveMaximum: 1 },
    valid: [0, 0.5, 0.9999999999999999],
    invalid: [1, 1.5, -0.1],
    // 0.99999999999999999 parses to 1.
    spellings: [{ text: "0.99999999999999999", accepted: false }],
  },
  {
    name: "minimum, maximum (number)",
    schema: { type: "number", minimum: 0, maximum: 1 },
    valid: [0, 0.5, 0.999, 1],
    invalid: [-0.5, 1.5, 2, -1, 1.0001, 1e3],
  },
  {
    name: "exclusiveMinimum, exclusiveMaximum (number)",
    schema: { type: "number", exclusiveMinimum: -2, exclusiveMaximum: 3 },
    valid: [-1, -1.5, 0, 2, 2.75],
    invalid: [-2, 3, 3.5, -2.5, -3],
  },
  {
    name: "exclusiveMinimum",
    schema: { type: "integer", exclusiveMinimum: 0 },
    valid: [1, 7],
    invalid: [0, -1],
  },
  {
    name: "draft-4 exclusiveMaximum",
    schema: { type: "integer", maximum: 10, exclusiveMaximum: true },
    valid: [9, -4],
    invalid: [10, 11],
  },
  {
    name: "bounds with no integer between",
    schema: { type: "integer", minimum: 1.2, maximum: 1.8 },
    valid: [],
    invalid: [],
    refuses: "no integer in it",
  },
  {
    name: "bounds beside enum",
    schema: { type: "integer", enum: [1, 5, 9], minimum: 4 },
    valid: [5, 9],
    invalid: [1, 4],
  },
  {
    name: "multipleOf",
    schema: { type: "integer", multipleOf: 3 },
    valid: [3],
    invalid: [4],
    refuses: "multipleOf",
  },
  {
    name: "minProperties, maxProperties",
    schema: { type: "object", additionalProperties: { type: "integer" }, minProperties: 1, maxProperties: 1 },
    valid: [{ a: 1 }],
    invalid: [{}, { a: 1, b: 2 }],
  },
  {
    name: "minProperties above 1 beside additionalProperties",
    schema: { type: "object", additionalProperties: { type: "integer" }, minProperties: 2 },
    valid: [{ a: 1, b: 2 }],
    // The backend would take {"a": 1, "a": 2}, one property once parsed.
    invalid: [{ a: 1 }],
    refuses: "minProperties above 1",
  },
  {
    name: "anyOf",
    schema: { anyOf: [{ type: "integer" }, { type: "string", maxLength: 1 }] },
    valid: [1, "a"],
    invalid: [null, "ab"],
  },
  {
    name: "anyOf beside properties",
    schema: { type: "object", properties: { a: { type: "integer" } }, anyOf: [{ type: "object" }] },
    valid: [{ a: 1 }, {}],
    invalid: [{ a: "x" }, []],
  },
  {
    name: "anyOf beside required",
    schema: {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "string" } },
      required: ["a"],
      anyOf: [{ required: ["b"] }, { properties: { a: { minimum: 10 } } }],
    },
    valid: [{ a: 1, b: "x" }, { a: 10 }],
    invalid: [{ a: 1 }, { b: "x" }, { a: "x", b: "x" }],
  },
  {
    name: "oneOf with overlapping branches",
    schema: { oneOf: [{ type: "integer" }, { type: "number" }] },
    valid: [1.5],
    invalid: [1],
    refuses: "oneOf",
  },
  {
    name: "oneOf of disjoint types",
    schema: { oneOf: [{ type: "string" }, { type: "array", items: { type: "integer" } }, { type: "null" }] },
    valid: ["a", [1], null],
    invalid: [1, ["a"], {}],
  },
  {
    name: "oneOf with a discriminating const",
    schema: {
      $defs: {
        a: {
          type: "object",
          properties: { kind: { const: "a" }, x: { type: "integer" } },
          required: ["kind", "x"],
        },
        b: {
          type: "object",
          properties: { kind: { const: "b" }, y: { type: "string" } },
          required: ["kind", "y"],
        },
      },
      oneOf: [{ $ref: "#/$defs/a" }, { $ref: "#/$defs/b" }],
    },
    valid: [
      { kind: "a", x: 1 },
      { kind: "b", y: "s" },
    ],
    invalid: [{ kind: "a", y: "s" }, { kind: "c", x: 1 }, { kind: "b", y: 1 }, {}],
  },
  {
    name: "oneOf of objects that can share an instance",
    schema: {
      oneOf: [
        { type: "object", properties: { a: { type: "integer" } } },
        { type: "object", properties: { b: { type: "integer" } } },
      ],
    },
    valid: [{ a: 1 }],
    invalid: [{}],
    refuses: "oneOf",
  },
  { name: "allOf of one", schema: { allOf: [{ type: "integer" }] }, valid: [1], invalid: ["a"] },
  {
    name: "allOf of two",
    schema: { allOf: [{ type: "integer" }, { type: "integer", minimum: 5 }] },
    valid: [5, 6],
    invalid: [1, 4, "a", 5.5],
  },
  {
    name: "allOf of objects",
    schema: {
      allOf: [
        { type: "object", properties: { a: { type: "integer" } }, required: ["a"] },
        { properties: { b: { type: "string", maxLength: 2 }, a: { minimum: 0 } }, required: ["b"] },
      ],
    },
    valid: [
      { a: 0, b: "x" },
      { a: 3, b: "xy" },
    ],
    invalid: [{ a: 1 }, { b: "x" }, { a: -1, b: "x" }, { a: 1, b: "xyz" }, { a: "1", b: "x" }],
  },
  {
    name: "allOf with a closed branch",
    schema: {
      allOf: [
        { type: "object", properties: { a: { type: "integer" } }, additionalProperties: false },
        { properties: { b: { type: "string" } }, required: ["b"] },
      ],
    },
    valid: [],
    invalid: [{ a: 1, b: "x" }],
    refuses: "allOf with more than one schema",
  },
  {
    name: "allOf of different patterns",
    schema: {
      allOf: [
        { type: "string", pattern: "^a" },
        { type: "string", pattern: "b$" },
      ],
    },
    valid: ["ab"],
    invalid: ["a"],
    refuses: "allOf with more than one schema",
  },
  {
    name: "$ref into $defs",
    schema: { $defs: { a: { type: "integer" } }, type: "object", properties: { x: { $ref: "#/$defs/a" } } },
    valid: [{ x: 1 }],
    invalid: [{ x: "s" }],
  },
  {
    name: "recursive $ref",
    schema: {
      $defs: { n: { type: "object", properties: { c: { type: "array", items: { $ref: "#/$defs/n" } } } } },
      $ref: "#/$defs/n",
    },
    valid: [{ c: [{ c: [] }] }],
    invalid: [{ c: [1] }],
  },
  {
    name: "$ref beside an assertion",
    schema: { $defs: { a: { type: "string" } }, $ref: "#/$defs/a", type: "string", maxLength: 3 },
    valid: ["a", "abc"],
    invalid: ["abcd", 1],
  },
  {
    name: "remote $ref",
    schema: { $ref: "http://example.com/s.json" },
    valid: [],
    invalid: [],
    refuses: "only local",
  },
  {
    name: "format date",
    schema: { type: "string", format: "date" },
    valid: ["2020-01-31", "2024-04-30"],
    invalid: ["x", "2020-13-01", "2020-1-1", "2024-02-30", "2023-04-31"],
  },
  {
    name: "format date-time",
    schema: { type: "string", format: "date-time" },
    valid: ["2020-01-31T10:00:00Z", "2020-01-31T23:59:59.5+01:00"],
    invalid: ["x", "2020-01-31", "2020-02-31T10:00:00Z", "2020-01-31T24:00:00Z"],
  },
  {
    name: "format time",
    schema: { type: "string", format: "time" },
    valid: ["10:00:00Z", "23:59:59.5+01:00"],
    invalid: ["x", "25:00:00Z", "05:34:60.685Z"],
  },
  {
    name: "format email",
    schema: { type: "string", format: "email" },
    valid: ["a@b.co", "first.last+tag@mail.example-1.org", "x_y@a.b.c"],
    // Quoted local parts and labels past 63 characters are refused by common validators.
    invalid: [
      "x",
      "a@",
      "a@x",
      '"a b"@x.com',
      `a@${"x".repeat(70)}.com`,
      "a..b@x.com",
      ".a@x.com",
      "a@-x.com",
      "a@[1.2.3.4]",
    ],
  },
  {
    name: "format uuid",
    schema: { type: "string", format: "uuid" },
    valid: ["123e4567-e89b-12d3-a456-426614174000"],
    invalid: ["x", "123e4567e89b12d3a456426614174000"],
  },
  {
    name: "format ipv4",
    schema: { type: "string", format: "ipv4" },
    valid: ["1.2.3.4", "255.0.10.199"],
    invalid: ["x", "256.1.1.1", "1.2.3", "44.44.065.146"],
  },
  {
    name: "format ipv6",
    schema: { type: "string", format: "ipv6" },
    valid: ["::1", "2001:db8::1"],
    invalid: ["x", "1.2.3.4"],
  },
  {
    name: "format hostname",
    schema: { type: "string", format: "hostname" },
    valid: ["a.com"],
    invalid: ["-x", "a..b"],
  },
  {
    name: "format uri",
    schema: { type: "string", format: "uri" },
    valid: ["http://a.com/x"],
    invalid: ["x", "a b"],
  },
  {
    name: "format duration",
    schema: { type: "string", format: "duration" },
    valid: ["P1D", "PT1H"],
    invalid: ["x", "1D"],
  },
  {
    name: "unknown format",
    schema: { type: "string", format: "color" },
    valid: ["red"],
    invalid: [],
    refuses: "format",
  },
  {
    name: "format on a type it does not apply to",
    schema: { type: "integer", format: "utc-millisec" },
    valid: [1],
    invalid: ["x", 1.5],
  },
  {
    name: "format byte",
    schema: { type: "string", format: "byte" },
    valid: ["aGk=", "", "aGVsbG8="],
    invalid: ["a", "!!!!", "aGk"],
  },
  { name: "not", schema: { type: "integer", not: { const: 1 } }, valid: [2], invalid: [1], refuses: "not" },
  {
    name: "not beside enum",
    schema: { enum: [1, 2, "x", { a: 1 }], not: { anyOf: [{ const: 1 }, { type: "object" }] } },
    valid: [2, "x"],
    invalid: [1, { a: 1 }, 3],
  },
  {
    name: "const in allOf beside not",
    schema: { allOf: [{ enum: [{ a: "s" }, { a: 1 }] }, { not: { properties: { a: { type: "string" } } } }] },
    valid: [{ a: 1 }],
    invalid: [{ a: "s" }, { a: 2 }],
  },
  {
    name: "not required",
    schema: {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "integer" } },
      not: { required: ["a", "b"] },
    },
    valid: [{ b: 1 }, {}],
    invalid: [{ a: 1, b: 2 }],
  },
  {
    name: "not type",
    schema: { type: ["string", "integer", "null"], not: { type: "null" } },
    valid: ["a", 1],
    invalid: [null],
  },
  {
    name: "patternProperties",
    schema: { type: "object", patternProperties: { "^a": { type: "integer" } } },
    // Narrowed: no names outside the pattern.
    valid: [{}, { a: 1 }, { ab: -2 }, { a: 1, "a-b c": 2 }],
    invalid: [{ a: "s" }, { b: 1 }, { ba: 1 }, { a: 1, b: 2 }, { a: 1.5 }],
  },
  {
    name: "patternProperties with additionalProperties false: names and values held",
    schema: {
      type: "object",
      patternProperties: { "^[a-z][a-z0-9_-]*$": { type: "string", minLength: 1 } },
      additionalProperties: false,
    },
    valid: [{}, { web: "nginx" }, { web: "x", db_2: "postgres", "cache-1": "redis" }],
    invalid: [{ Web: "x" }, { web: "" }, { web: 1 }, { "": "x" }, { "2web": "x" }, []],
    invalidTexts: ['{"we"b":"x"}'],
  },
  {
    name: "patternProperties of any name",
    schema: { type: "object", patternProperties: { ".*": { type: "array", items: { type: "string" } } } },
    valid: [{}, { "x y": ["a"], "": [] }, { "Content-Type": ["text/plain"] }],
    invalid: [{ x: [1] }, { x: "a" }, { x: ["a"], y: null }],
  },
  {
    name: "patternProperties whose values are not enforced: no names",
    schema: {
      type: "object",
      patternProperties: { "^a": { type: "array", contains: { const: 1 } } },
    },
    // Narrowed to no properties at all, as before pattern keys were enforced.
    valid: [{}],
    invalid: [{ a: [1] }, { a: [2] }],
  },
  {
    name: "patternProperties keyed by alternatives",
    schema: { type: "object", patternProperties: { "^x|y$": { type: "integer" } } },
    valid: [{}, { x: 1 }, { xz: 1, zy: 2 }],
    invalid: [{ z: 1 }, { yx: 1 }, { x: "s" }],
    invalidTexts: ['{"x:1}', '{y":1}'],
  },
  {
    name: "patternProperties with two patterns",
    schema: { type: "object", patternProperties: { "^a": { type: "integer" }, b$: { type: "string" } } },
    // Narrowed to no properties at all (a name matching both would be held to one schema).
    valid: [{}],
    invalid: [{ ab: 1 }, { a: 1 }, { b: "x" }],
  },

  {
    name: "patternProperties matching a declared name",
    schema: {
      type: "object",
      properties: { ab: { type: "string" } },
      patternProperties: { "^a": { type: "integer" } },
    },
    valid: [],
    invalid: [{ ab: "s" }],
    refuses: "patternProperties",
  },
  {
    name: "uniqueItems",
    schema: { type: "array", items: { type: "integer" }, uniqueItems: true },
    // Narrowed to at most one item.
    valid: [[1], []],
    invalid: [
      [1, 1],
      [2, 2, 2],
    ],
  },
  {
    name: "uniqueItems with minItems above one",
    schema: { type: "array", items: { type: "integer" }, uniqueItems: true, minItems: 2 },
    valid: [[1, 2]],
    invalid: [[1, 1]],
    refuses: "uniqueItems",
  },
  {
    name: "contains",
    schema: { type: "array", items: { type: "integer" }, contains: { const: 1 } },
    valid: [[1]],
    invalid: [[2]],
    refuses: "contains",
  },
  {
    name: "if/then/else",
    // Parsed from text: a literal with a "then" key would be a thenable.
    schema: JSON.parse('{"type":"integer","if":{"minimum":5},"then":{"maximum":7}}'),
    valid: [6],
    invalid: [8],
    refuses: "if/then/else",
  },
  {
    name: "dependentRequired",
    schema: {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "integer" } },
      dependentRequired: { a: ["b"] },
    },
    valid: [{ a: 1, b: 2 }, { b: 2 }],
    invalid: [{ a: 1 }],
  },
  {
    name: "required without properties",
    schema: { type: "object", required: ["a"] },
    valid: [{ a: 1 }, { a: "x" }, { a: 1, b: 2 }],
    invalid: [{}, { b: 1 }],
  },
  {
    name: "string keyword without type",
    schema: { minLength: 3 },
    valid: ["abc"],
    invalid: ["a"],
  },
  {
    name: "number keyword without type",
    schema: { minimum: 3 },
    valid: [3, 4.5],
    invalid: [1, 2.5],
  },
  {
    name: "array keyword without type",
    schema: { minItems: 2, items: { type: "integer" } },
    valid: [[1, 2]],
    invalid: [[1], []],
  },
  {
    name: "any object",
    schema: { type: "object", additionalProperties: true },
    valid: [{ a: [1, { b: null }] }],
    invalid: [[], 1],
  },
  { name: "true", schema: true, valid: [1, { a: 1 }, "x"], invalid: [] },
  {
    name: "annotations",
    schema: {
      title: "t",
      description: "d",
      examples: [1],
      default: 1,
      $comment: "c",
      "x-vendor": 1,
      type: "integer",
    },
    valid: [1],
    invalid: ["a"],
  },
];

/** Regular expressions: features the checker allows must be enforced exactly. */
export const REGEX_CASES: { pattern: string; valid: string[]; invalid: string[]; refuses?: string }[] = [
  { pattern: "abc", valid: ["abc"], invalid: ["ab", "abcd", "abd"] },
  { pattern: "[a-c]+\\d{2}", valid: ["a12", "cab99"], invalid: ["12", "a1", "d12", "a123"] },
  { pattern: "[^x]{2,3}", valid: ["ab", "abc"], invalid: ["a", "xa", "abcd"] },
  { pattern: "(ab|cd)*e?", valid: ["", "ab", "abcde", "e"], invalid: ["abc", "ee"] },
  { pattern: "(?:a|b)+\\.", valid: ["ab."], invalid: ["ab", "c."] },
  { pattern: "\\w+@\\w+", valid: ["a_1@b"], invalid: ["a@", "a b@c"] },
  { pattern: "\\s\\S", valid: [" a"], invalid: ["aa", "  "] },
  { pattern: "^yes|no$", valid: ["yes", "no"], invalid: ["yesno", "maybe"] },
  { pattern: "a.c", valid: ["abc", "a-c"], invalid: ["ac", "a\nc"] },
  { pattern: "\\u00e9{2}", valid: ["éé"], invalid: ["é", "ee"] },
  { pattern: "(?=a)a", valid: [], invalid: [], refuses: "lookahead" },
  { pattern: "(a)\\1", valid: [], invalid: [], refuses: "backreference" },
  { pattern: "a+?", valid: [], invalid: [], refuses: "lazy" },
  { pattern: "\\bword", valid: [], invalid: [], refuses: "word boundary" },
  { pattern: "(?<n>a)", valid: [], invalid: [], refuses: "named group" },
  { pattern: "\\p{L}", valid: [], invalid: [], refuses: "Unicode property" },
  { pattern: "a(", valid: [], invalid: [], refuses: "invalid regular expression" },
];
