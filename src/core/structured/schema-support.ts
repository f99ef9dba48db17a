/**
 * Fail closed: the JSON Schema features the grammar backend (XGrammar) enforces, as an explicit
 * allow-list. A schema is walked (through its local $refs) and the first assertion the backend
 * would not enforce is named, so the request is refused instead of producing output that does not
 * validate. Annotations (title, description, unknown keywords...) assert nothing and pass.
 * Each rule was found by driving the backend with instances that violate the keyword
 * (test/structured/schema-support.test.ts keeps those experiments): a keyword stays allowed only if
 * every such instance is rejected.
 */

import { EXTRA_SLOT } from "./extra-names.ts";
import { integerBounds, rangeRules } from "./numeric-range.ts";
import { anyOrderSlot, extraMarker, OBJECT_SLOT, type ObjectSlot, propertyMarker } from "./object-order.ts";
import { forJsonString, searchForm, unsupportedRegexFeature } from "./regex-support.ts";
import { normalizeSchema, patternKeyed } from "./schema-normalize.ts";
import { STRING_SLOT, type StringSlot, stringSlot } from "./string-length.ts";

const TYPES = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);

/** Formats the backend enforces as a grammar. */
export const ENFORCED_FORMATS = new Set([
  "date-time",
  "date",
  "time",
  "email",
  "uuid",
  "ipv4",
  "ipv6",
  "hostname",
  "uri",
  "duration",
  "byte",
]);

/** Assertion keywords the backend does not enforce (or enforces wrongly): always refused. */
const REFUSED = new Map([
  ["not", "not"],
  ["if", "if/then/else"],
  ["then", "if/then/else"],
  ["else", "if/then/else"],
  ["oneOf", "oneOf (enforced as anyOf: an instance matching two branches would pass)"],
  ["patternProperties", "patternProperties"],
  ["propertyNames", "propertyNames"],
  ["dependencies", "dependencies"],
  ["dependentRequired", "dependentRequired"],
  ["dependentSchemas", "dependentSchemas"],
  ["contains", "contains"],
  ["minContains", "minContains"],
  ["maxContains", "maxContains"],
  ["unevaluatedProperties", "unevaluatedProperties"],
  ["unevaluatedItems", "unevaluatedItems"],
  ["additionalItems", "additionalItems"],
  ["multipleOf", "multipleOf"],
  ["$dynamicRef", "$dynamicRef"],
  ["$recursiveRef", "$recursiveRef"],
]);

/** The keywords refused wherever they appear (the schemathesis hooks read them too). */
export const REFUSED_SCHEMA_KEYWORDS: readonly string[] = [...REFUSED.keys()];

const STRING_KEYWORDS = ["minLength", "maxLength", "pattern", "format"];
const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
const ARRAY_KEYWORDS = ["items", "prefixItems", "minItems", "maxItems", "uniqueItems"];
const OBJECT_KEYWORDS = ["minProperties", "maxProperties"];

const COMBINATORS = ["$ref", "anyOf", "allOf"];
/** Every assertion keyword allowed above. */
const ASSERTIONS = new Set([
  "type",
  "enum",
  "const",
  "properties",
  "required",
  "additionalProperties",
  ...STRING_KEYWORDS,
  ...NUMBER_KEYWORDS,
  ...ARRAY_KEYWORDS,
  ...OBJECT_KEYWORDS,
]);

export class UnsupportedSchema extends Error {
  /** JSON pointer of the offending schema inside the request's schema. */
  readonly at: string;
  constructor(at: string, what: string) {
    super(`${what} at ${at || "#"}`);
    this.at = at;
  }
}

export interface CheckOptions {
  /**
   * Numeric bounds and open objects' extra names are enforced by grammar rules spliced into the
   * backend's grammar (backendJsonSchema), which only a constraint compiled from the schema alone
   * takes; inside structural tags and tool calls numeric bounds are refused beyond minimum 0 or 1
   * on integers, and objects are closed to their declared properties.
   */
  splicedRules?: boolean;
}

/**
 * Throws UnsupportedSchema naming the first feature the backend would not enforce in the schema
 * as rewritten by schema-normalize.ts (the form the backend is given).
 */
export function checkJsonSchema(schema: unknown, options: CheckOptions = {}): void {
  checkedNormalForm(schema, options);
}

/**
 * The schema as normalized for the backend (schema-normalize.ts), checked. Its pattern-keyed
 * objects are kept only when the whole schema, their pattern values included, is enforced; else
 * they are closed to no names (a narrowing). Throws UnsupportedSchema as checkJsonSchema does.
 */
function checkedNormalForm(schema: unknown, options: CheckOptions): unknown {
  const openObjects = options.splicedRules;
  const keyed = normalizeSchema(schema, { openObjects });
  try {
    checkNormalized(keyed, options);
    return keyed;
  } catch (err) {
    if (!(err instanceof UnsupportedSchema)) throw err;
  }
  const closed = normalizeSchema(schema, { openObjects, patternKeys: false });
  checkNormalized(closed, options);
  return closed;
}

function checkNormalized(root: unknown, options: CheckOptions): void {
  if (options.splicedRules)
    for (const slot of [RANGE_SLOT, EXTRA_SLOT, OBJECT_SLOT, STRING_SLOT])
      if (JSON.stringify(root).includes(slot))
        throw new UnsupportedSchema("", `the text ${slot}, which marks spliced grammar rules`);
  const seen = new Set<unknown>();
  const walk = (s: unknown, at: string): void => {
    if (s === true) return;
    if (s === false) throw new UnsupportedSchema(at, "the schema false");
    if (typeof s !== "object" || s === null || Array.isArray(s))
      throw new UnsupportedSchema(at, "a schema that is not an object or true");
    if (seen.has(s)) return;
    seen.add(s);
    const o = s as Record<string, unknown>;
    for (const key of Object.keys(o)) {
      const refused = REFUSED.get(key);
      // patternProperties stays only in the shape the backend enforces exactly (patternKeyed).
      if (refused && !(key === "patternProperties" && patternKeyed(o)))
        throw new UnsupportedSchema(at, `keyword ${refused}`);
    }
    const types = typeList(o.type, at);
    const needType = (keywords: string[], allowed: string[]) => {
      for (const k of keywords)
        if (k in o && !(types && types.length > 0 && types.every((t) => allowed.includes(t) || t === "null")))
          throw new UnsupportedSchema(
            at,
            `keyword ${k} without "type": ${allowed.map((t) => JSON.stringify(t)).join(" or ")} beside it`,
          );
    };
    needType(STRING_KEYWORDS, ["string"]);
    needType(NUMBER_KEYWORDS, ["integer", "number"]);
    needType(ARRAY_KEYWORDS, ["array"]);
    needType(OBJECT_KEYWORDS, ["object"]);

    if ("enum" in o && !Array.isArray(o.enum)) throw new UnsupportedSchema(at, "enum that is not an array");
    if ("pattern" in o) {
      if (typeof o.pattern !== "string") throw new UnsupportedSchema(at, "pattern that is not a string");
      const problem = unsupportedRegexFeature(o.pattern);
      if (problem) throw new UnsupportedSchema(at, `pattern with ${problem}`);
      const json = forJsonString(o.pattern);
      if ("refused" in json) throw new UnsupportedSchema(at, `pattern with ${json.refused}`);
      // The backend ignores length and format beside a pattern (it warns so).
      for (const k of ["minLength", "maxLength", "format"])
        if (k in o) throw new UnsupportedSchema(at, `pattern beside ${k}`);
    }
    if ("format" in o)
      for (const k of ["minLength", "maxLength"])
        if (k in o) throw new UnsupportedSchema(at, `format beside ${k}`);
    if ("format" in o && !ENFORCED_FORMATS.has(String(o.format)))
      throw new UnsupportedSchema(at, `format ${JSON.stringify(o.format)}`);
    // The backend's numeric ranges are not exact (minimum 2 lets 1 through, maximum -9 lets -8
    // through, number bounds let values just outside pass); only a lower bound of 0 or 1 on
    // integers held in every probe.
    const bounds = NUMBER_KEYWORDS.filter((k) => k in o);
    if (bounds.length > 0 && options.splicedRules) {
      if (!types?.every((t) => t === "integer" || t === "number" || t === "null"))
        throw new UnsupportedSchema(
          at,
          `${bounds.join(" and ")} beside types other than integer, number and null`,
        );
      if ("enum" in o || "const" in o)
        throw new UnsupportedSchema(at, `${bounds.join(" and ")} beside enum or const`);
      const b = integerBounds(o);
      if ("refused" in b) throw new UnsupportedSchema(at, b.refused);
    } else if (bounds.length > 0) {
      const safe =
        bounds.length === 1 &&
        bounds[0] === "minimum" &&
        (o.minimum === 0 || o.minimum === 1) &&
        types?.every((t) => t === "integer" || t === "null");
      if (!safe)
        throw new UnsupportedSchema(
          at,
          `${bounds.join(" and ")} (numeric ranges are enforced only as minimum 0 or 1 on integers)`,
        );
    }
    if ("uniqueItems" in o && o.uniqueItems !== false) throw new UnsupportedSchema(at, "uniqueItems");
    if ("allOf" in o) {
      if (!Array.isArray(o.allOf) || o.allOf.length !== 1)
        throw new UnsupportedSchema(at, "allOf with more than one schema");
      walk(o.allOf[0], `${at}/allOf/0`);
    }
    if ("anyOf" in o) {
      if (!Array.isArray(o.anyOf) || o.anyOf.length === 0)
        throw new UnsupportedSchema(at, "anyOf that is not a non-empty array");
      o.anyOf.forEach((b, i) => {
        walk(b, `${at}/anyOf/${i}`);
      });
    }
    if ("properties" in o) {
      const props = o.properties;
      if (typeof props !== "object" || props === null || Array.isArray(props))
        throw new UnsupportedSchema(at, "properties that is not an object");
      for (const [name, sub] of Object.entries(props)) walk(sub, `${at}/properties/${escapePointer(name)}`);
    }
    if ("patternProperties" in o)
      for (const [name, sub] of Object.entries(o.patternProperties as Record<string, unknown>))
        walk(sub, `${at}/patternProperties/${escapePointer(name)}`);
    if ("required" in o) {
      if (!Array.isArray(o.required) || o.required.some((r) => typeof r !== "string"))
        throw new UnsupportedSchema(at, "required that is not an array of strings");
      // The backend enforces required only for declared properties (measured).
      const declared = (o.properties ?? {}) as Record<string, unknown>;
      const missing = (o.required as string[]).find((r) => !Object.hasOwn(declared, r));
      if (missing !== undefined)
        throw new UnsupportedSchema(at, `required ${JSON.stringify(missing)} that is not in properties`);
    }
    if ("additionalProperties" in o && o.additionalProperties !== false) {
      // With declared properties, the backend's own extra properties may repeat a declared name
      // with any value (measured); only the spliced extra-name rule keeps them apart.
      if ("properties" in o && !options.splicedRules)
        throw new UnsupportedSchema(at, "additionalProperties other than false beside properties");
      walk(o.additionalProperties, `${at}/additionalProperties`);
    }
    if ("items" in o) {
      if (Array.isArray(o.items)) throw new UnsupportedSchema(at, "items as an array (use prefixItems)");
      walk(o.items, `${at}/items`);
    }
    if ("prefixItems" in o) {
      if (!Array.isArray(o.prefixItems)) throw new UnsupportedSchema(at, "prefixItems that is not an array");
      o.prefixItems.forEach((b, i) => {
        walk(b, `${at}/prefixItems/${i}`);
      });
    }
    for (const k of ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"])
      if (k in o && !(Number.isInteger(o[k]) && (o[k] as number) >= 0))
        throw new UnsupportedSchema(at, `${k} that is not a non-negative integer`);
    if ((o.minLength as number) > (o.maxLength as number))
      throw new UnsupportedSchema(at, "minLength greater than maxLength (no string satisfies it)");
    // The backend counts an extra name each time it is written, JSON.parse keeps one: {"a":1,"a":2}
    // would pass minProperties 2 (measured).
    if ((o.minProperties as number) > 1 && "additionalProperties" in o && o.additionalProperties !== false)
      throw new UnsupportedSchema(
        at,
        "minProperties above 1 beside additionalProperties (a repeated name counts twice)",
      );
    if ("$ref" in o) walk(resolveRef(root, o.$ref, at), String(o.$ref));
    // The backend takes $ref, anyOf and allOf alone: assertions beside them are not combined (measured).
    const combinators = COMBINATORS.filter((k) => k in o);
    if (combinators.length > 0) {
      const beside = Object.keys(o).filter((k) => ASSERTIONS.has(k) && !combinators.includes(k));
      if (combinators.length > 1 || beside.length > 0)
        throw new UnsupportedSchema(at, `${[...combinators, ...beside].join(" beside ")}`);
    }
  };
  walk(root, "");
}

function typeList(t: unknown, at: string): string[] | undefined {
  if (t === undefined) return undefined;
  const list = Array.isArray(t) ? t : [t];
  for (const x of list)
    if (typeof x !== "string" || !TYPES.has(x)) throw new UnsupportedSchema(at, `type ${JSON.stringify(x)}`);
  return list as string[];
}

function escapePointer(s: string): string {
  return s.replaceAll("~", "~0").replaceAll("/", "~1");
}

/** A local reference ("#" or "#/a/b") into the root schema. */
function resolveRef(root: unknown, ref: unknown, at: string): unknown {
  if (typeof ref !== "string" || !(ref === "#" || ref.startsWith("#/")))
    throw new UnsupportedSchema(at, `$ref ${JSON.stringify(ref)} (only local #/... references)`);
  let node: unknown = root;
  for (const raw of ref === "#" ? [] : ref.slice(2).split("/")) {
    const key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    if (typeof node !== "object" || node === null || !(key in node))
      throw new UnsupportedSchema(at, `$ref ${JSON.stringify(ref)} that points nowhere`);
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/** RFC 3339 full-date with each month's real length (29 February is never generated). */
const DATE =
  "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))";
const TIME =
  "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
const OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const IPV4 = `(?:${OCTET}\\.){3}${OCTET}`;
/** Formats given to the backend as patterns: its own grammars accept dates such as 2024-02-30. */
const FORMAT_PATTERNS: Record<string, string> = {
  date: `^${DATE}$`,
  "date-time": `^${DATE}T${TIME}$`,
  // Without leap seconds (RFC 3339 allows 60 only at 23:59 UTC) and with ipv4 octets without
  // leading zeros: the backend's own grammars let both through.
  time: `^${TIME}$`,
  ipv4: `^${IPV4}$`,
  // ajv-formats' full email with labels of 1 to 22 characters (63 in its fast form): a dot-atom
  // local part, a domain of two labels or more. The backend's own grammar also takes quoted local
  // parts, one-label domains and labels of any length, which validators refuse.
  email:
    "^[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?\\.)+[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?$",
  // OpenAPI's base64 bytes (RFC 4648 with padding).
  byte: "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
};

/** A character a JSON string holds unescaped: not a control character, quote or backslash. */
const JSON_STRING_CHAR = '[^\\x00-\\x1f"\\\\]';

/**
 * A length-bounded string as a pattern the backend reads cheaply and safely. Its own reading of
 * minLength/maxLength lets raw control characters (a tab) into the string, which is not JSON, and
 * puts an unbounded run before the counted one, so every step weighs every split of the text so
 * far (1 ms per token at minLength 2,000; here 1 µs). Escapes are not generated, as before.
 * Debt: the backend reads a class such as JSON_STRING_CHAR over bytes without checking UTF-8, so
 * a malformed multi-byte sequence counts as one character (lone byte tokens can spell one).
 */
function lengthPattern(min = 0, max?: number): string {
  const head = min > 0 ? `${JSON_STRING_CHAR}{${min}}` : "";
  const tail =
    max === undefined ? `${JSON_STRING_CHAR}*` : max > min ? `${JSON_STRING_CHAR}{0,${max - min}}` : "";
  return `^${head}${tail}$`;
}

/**
 * The schema as the backend is given it inside structural tags and tool calls: normalized
 * (schema-normalize.ts, objects closed), then rewritten by backendPatterns.
 */
export function withBackendPatterns(schema: unknown): unknown {
  return backendPatterns(checkedNormalForm(schema, {}));
}

/** Marks, as a const string, where a numeric range's grammar rule goes (followed by its index). */
export const RANGE_SLOT = "ortserve-range-";

/** What backendJsonSchema leaves for rules spliced into the backend's grammar. */
export interface Splices {
  /** Range slot i's EBNF rules (entered by rangeRuleName(i), numeric-range.ts). */
  rangeRules: string[];
  /** Extra-name slot i's declared names (extra-names.ts spliceExtraNames). */
  extraNames: string[][];
  /** Any-order object slot j (object-order.ts spliceAnyOrder). */
  objects: ObjectSlot[];
  /** Bounded string slot i, one per distinct bound (string-length.ts spliceStrings). */
  strings: StringSlot[];
  /** Every $ref of the schema. */
  refs: string[];
}

/**
 * An object marked for an any-order rule: the whole as anyOf [const `${OBJECT_SLOT}<j>`, the
 * object] (its definitions kept where they were), each property's value and the extra-properties
 * value as anyOf [their marker, their schema].
 */
function anyOrderObject(o: Record<string, unknown>, slot: ObjectSlot, splices: Splices): unknown {
  const j = splices.objects.push(slot) - 1;
  const { $defs, definitions, ...rest } = o;
  rest.properties = Object.fromEntries(
    slot.names.map((n, i) => [
      n,
      { anyOf: [{ const: propertyMarker(j, i) }, (o.properties as Record<string, unknown>)[n]] },
    ]),
  );
  if (slot.open) rest.additionalProperties = { anyOf: [{ const: extraMarker(j) }, o.additionalProperties] };
  return {
    anyOf: [{ const: `${OBJECT_SLOT}${j}` }, rest],
    ...($defs === undefined ? {} : { $defs }),
    ...(definitions === undefined ? {} : { definitions }),
  };
}

/**
 * The schema as the backend is given it when rules are spliced: normalized with open objects,
 * rewritten by backendPatterns, each bounded number replaced by the const `${RANGE_SLOT}<i>`
 * whose grammar is rangeRules[i], and each open object with declared properties given the
 * extra-properties value anyOf [const `${EXTRA_SLOT}<i>`, its schema], whose key the grammar
 * keeps apart from extraNames[i]. Call after checkJsonSchema with splicedRules.
 */
export function backendJsonSchema(schema: unknown): { schema: unknown } & Splices {
  const normalized = checkedNormalForm(schema, { splicedRules: true });
  const refs: string[] = [];
  JSON.stringify(normalized, (k, v) => {
    if (k === "$ref" && typeof v === "string") refs.push(v);
    return v;
  });
  const splices: Splices = { rangeRules: [], extraNames: [], objects: [], strings: [], refs };
  return { schema: backendPatterns(normalized, splices), ...splices };
}

/** The EBNF rules of range slot i, entered by rangeRuleName(i). */
function rangeRule(o: Record<string, unknown>, i: number): string {
  const b = integerBounds(o);
  if ("refused" in b) throw new Error(b.refused);
  const types = (Array.isArray(o.type) ? o.type : [o.type]) as string[];
  return rangeRules(rangeRuleName(i), b, types.includes("number"), types.includes("null")).join("\n");
}

export function rangeRuleName(i: number): string {
  return `ortserve_range_${i}`;
}

/**
 * The schema as the backend must read it: every `pattern` in the JSON-safe form (regex-support.ts
 * forJsonString), the date formats as exact patterns and string lengths as patterns (lengthPattern).
 * Call after checkJsonSchema passed.
 */
function backendPatterns(schema: unknown, splices?: Splices, at = ""): unknown {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return schema;
  const out: Record<string, unknown> = { ...schema };
  if (splices && NUMBER_KEYWORDS.some((k) => k in out)) {
    const { rangeRules } = splices;
    rangeRules.push(rangeRule(out, rangeRules.length));
    return { const: `${RANGE_SLOT}${rangeRules.length - 1}` };
  }
  const bounded = splices && stringSlot(out);
  if (bounded) {
    const { strings } = splices;
    let i = strings.findIndex(
      (s) => s.min === bounded.min && s.max === bounded.max && s.nullable === bounded.nullable,
    );
    if (i < 0) i = strings.push(bounded) - 1;
    return { const: `${STRING_SLOT}${i}` };
  }
  const sub = (s: unknown, key: string) => backendPatterns(s, splices, `${at}/${key}`);
  if (typeof out.pattern === "string") {
    const json = forJsonString(out.pattern);
    if ("pattern" in json) out.pattern = searchForm(json.pattern);
  }
  if (typeof out.format === "string" && out.format in FORMAT_PATTERNS) {
    out.pattern = FORMAT_PATTERNS[out.format];
    delete out.format;
  }
  if ("minLength" in out || "maxLength" in out) {
    out.pattern = lengthPattern(out.minLength as number | undefined, out.maxLength as number | undefined);
    delete out.minLength;
    delete out.maxLength;
  }
  // Recursion only into the places a subschema may sit (checkJsonSchema refused the others).
  for (const k of ["properties", "$defs", "definitions"])
    if (typeof out[k] === "object" && out[k] !== null)
      out[k] = Object.fromEntries(
        Object.entries(out[k]).map(([name, v]) => [name, sub(v, `${k}/${escapePointer(name)}`)]),
      );
  // A pattern-keyed object's names (schema-normalize.ts patternKeyed) in the JSON-safe form.
  if (typeof out.patternProperties === "object" && out.patternProperties !== null)
    out.patternProperties = Object.fromEntries(
      Object.entries(out.patternProperties).map(([p, v]) => {
        const json = forJsonString(p);
        return [
          "pattern" in json ? searchForm(json.pattern) : p,
          sub(v, `patternProperties/${escapePointer(p)}`),
        ];
      }),
    );
  for (const k of ["anyOf", "allOf", "prefixItems"])
    if (Array.isArray(out[k])) out[k] = (out[k] as unknown[]).map((v, i) => sub(v, `${k}/${i}`));
  for (const k of ["items", "additionalProperties"]) if (k in out) out[k] = sub(out[k], k);
  const slot = splices && anyOrderSlot(out);
  // A $ref into the object's own parts (not its definitions) would find them marked: keep the
  // declared order there.
  const refInside = splices?.refs.some(
    (r) => r.startsWith(`#${at}/`) && !/^(\$defs|definitions)\//.test(r.slice(at.length + 2)),
  );
  if (splices && slot && !refInside) return anyOrderObject(out, slot, splices);
  const declared =
    typeof out.properties === "object" && out.properties !== null ? Object.keys(out.properties) : [];
  if (splices && declared.length > 0 && "additionalProperties" in out && out.additionalProperties !== false) {
    splices.extraNames.push(declared);
    out.additionalProperties = {
      anyOf: [{ const: `${EXTRA_SLOT}${splices.extraNames.length - 1}` }, out.additionalProperties],
    };
  }
  return out;
}
