/**
 * Fail closed: the JSON Schema features the grammar backend (XGrammar) enforces, as an explicit
 * allow-list. A schema is walked (through its local $refs) and the first assertion the backend
 * would not enforce is named, so the request is refused instead of producing output that does not
 * validate. Annotations (title, description, unknown keywords...) assert nothing and pass.
 * Each rule was found by driving the backend with instances that violate the keyword
 * (test/structured/schema-support.test.ts keeps those experiments): a keyword stays allowed only if
 * every such instance is rejected.
 */
import { forBackend, unsupportedRegexFeature } from "./regex-support.ts";

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

/** Throws UnsupportedSchema naming the first feature the backend would not enforce. */
export function checkJsonSchema(root: unknown): void {
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
      if (refused) throw new UnsupportedSchema(at, `keyword ${refused}`);
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
    }
    if ("format" in o && !ENFORCED_FORMATS.has(String(o.format)))
      throw new UnsupportedSchema(at, `format ${JSON.stringify(o.format)}`);
    for (const k of ["exclusiveMinimum", "exclusiveMaximum"])
      if (k in o) {
        if (typeof o[k] !== "number") throw new UnsupportedSchema(at, `${k} that is not a number`);
        if (!types?.every((t) => t === "integer" || t === "null"))
          throw new UnsupportedSchema(at, `${k} on a type other than integer`);
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
    if ("required" in o && (!Array.isArray(o.required) || o.required.some((r) => typeof r !== "string")))
      throw new UnsupportedSchema(at, "required that is not an array of strings");
    if ("additionalProperties" in o && o.additionalProperties !== false) {
      // With declared properties, extra properties are let through unchecked (measured).
      if ("properties" in o)
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
    for (const k of ["minimum", "maximum"])
      if (k in o && typeof o[k] !== "number") throw new UnsupportedSchema(at, `${k} that is not a number`);
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

/** The schema with every `pattern` in the backend's reading (regex-support.ts `forBackend`). */
export function withBackendPatterns(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withBackendPatterns);
  if (typeof schema !== "object" || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema))
    out[k] =
      k === "pattern" && typeof v === "string"
        ? forBackend(v)
        : k === "enum" || k === "const" || k === "default" || k === "examples"
          ? v
          : withBackendPatterns(v);
  return out;
}
