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
    valid: [{ a: 1 }, { a: 1, b: "x" }],
    invalid: [{}, { a: "x" }, { b: "x" }, { a: 1, c: 2 }, []],
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
    valid: [{ a: 1 }],
    invalid: [{ a: "x" }],
    refuses: "additionalProperties other than false beside properties",
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
    name: "minLength, maxLength",
    schema: { type: "string", minLength: 2, maxLength: 3 },
    valid: ["ab", "abc", "éé"],
    invalid: ["a", "abcd", ""],
  },
  { name: "pattern", schema: { type: "string", pattern: "^[a-c]+$" }, valid: ["abc"], invalid: ["abd", ""] },
  {
    name: "pattern with .",
    schema: { type: "string", pattern: "^a.c$" },
    valid: ["abc", "a.c"],
    invalid: ["a\nc", "ac"],
  },
  {
    name: "pattern with a lookahead",
    schema: { type: "string", pattern: "^(?!x)[a-z]+$" },
    valid: ["a"],
    invalid: ["x"],
    refuses: "lookahead",
  },
  {
    name: "minimum, maximum (integer)",
    schema: { type: "integer", minimum: -3, maximum: 10 },
    valid: [-3, 0, 10],
    invalid: [-4, 11, 100, -10],
  },
  {
    name: "exclusiveMinimum, exclusiveMaximum (integer)",
    schema: { type: "integer", exclusiveMinimum: 1, exclusiveMaximum: 10 },
    valid: [2, 9],
    invalid: [1, 10, 0],
  },
  {
    name: "minimum, maximum (number)",
    schema: { type: "number", minimum: 1.5, maximum: 20 },
    valid: [1.5, 19.25],
    invalid: [1.4, 21, -1, 0],
  },
  {
    name: "exclusiveMinimum (number)",
    schema: { type: "number", exclusiveMinimum: 0 },
    valid: [0.5],
    invalid: [0, -1],
    refuses: "exclusiveMinimum on a type other than integer",
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
    name: "anyOf",
    schema: { anyOf: [{ type: "integer" }, { type: "string", maxLength: 1 }] },
    valid: [1, "a"],
    invalid: [null, "ab"],
  },
  {
    name: "anyOf beside properties",
    schema: { type: "object", properties: { a: { type: "integer" } }, anyOf: [{ required: ["a"] }] },
    valid: [{ a: 1 }],
    invalid: [{}],
    refuses: "anyOf beside type",
  },
  {
    name: "oneOf",
    schema: { oneOf: [{ type: "integer" }, { type: "number" }] },
    valid: [1.5],
    invalid: [1],
    refuses: "oneOf",
  },
  { name: "allOf of one", schema: { allOf: [{ type: "integer" }] }, valid: [1], invalid: ["a"] },
  {
    name: "allOf of two",
    schema: { allOf: [{ type: "integer" }, { type: "integer", minimum: 5 }] },
    valid: [5],
    invalid: [1],
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
    schema: { $defs: { a: { type: "integer" } }, $ref: "#/$defs/a", type: "integer", maximum: 3 },
    valid: [1],
    invalid: [5],
    refuses: "$ref beside type",
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
    valid: ["2020-01-31"],
    invalid: ["x", "2020-13-01", "2020-1-1"],
  },
  {
    name: "format date-time",
    schema: { type: "string", format: "date-time" },
    valid: ["2020-01-31T10:00:00Z"],
    invalid: ["x", "2020-01-31"],
  },
  {
    name: "format time",
    schema: { type: "string", format: "time" },
    valid: ["10:00:00Z"],
    invalid: ["x", "25:00:00Z"],
  },
  {
    name: "format email",
    schema: { type: "string", format: "email" },
    valid: ["a@b.co"],
    invalid: ["x", "a@"],
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
    valid: ["1.2.3.4"],
    invalid: ["x", "256.1.1.1", "1.2.3"],
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
  { name: "not", schema: { type: "integer", not: { const: 1 } }, valid: [2], invalid: [1], refuses: "not" },
  {
    name: "patternProperties",
    schema: { type: "object", patternProperties: { "^a": { type: "integer" } } },
    valid: [{ a: 1 }],
    invalid: [{ a: "s" }],
    refuses: "patternProperties",
  },
  {
    name: "uniqueItems",
    schema: { type: "array", items: { type: "integer" }, uniqueItems: true },
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
    valid: [{ a: 1, b: 2 }],
    invalid: [{ a: 1 }],
    refuses: "dependentRequired",
  },
  {
    name: "string keyword without type",
    schema: { minLength: 3 },
    valid: ["abc"],
    invalid: ["a"],
    refuses: "minLength without",
  },
  {
    name: "number keyword without type",
    schema: { minimum: 3 },
    valid: [3],
    invalid: [1],
    refuses: "minimum without",
  },
  {
    name: "array keyword without type",
    schema: { minItems: 2 },
    valid: [[1, 2]],
    invalid: [[1]],
    refuses: "minItems without",
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
