/**
 * A JSON Schema rewritten into one the backend enforces exactly, with the same or a narrower set
 * of instances (never a wider one): `allOf` merged into one schema where the merge is exact,
 * `oneOf` read as `anyOf` where its branches are provably disjoint, assertions beside `anyOf`
 * distributed into its branches, enums beside other assertions reduced to their valid values
 * (enum-filter.ts), and some keywords narrowed (objects closed to their declared properties where
 * an open object could not be enforced exactly, `uniqueItems` as at most one item, typed keywords
 * given their type). What cannot be rewritten is left as it was, for schema-support.ts to refuse
 * by name.
 *
 * Only positive positions are rewritten (the checker refuses `not`), so narrowing any subschema
 * narrows the whole. Disjointness is judged on the original branches, before narrowing.
 */

import { filterEnums } from "./enum-filter.ts";
import { forJsonString, unsupportedRegexFeature } from "./regex-support.ts";

type Schema = Record<string, unknown>;
type Resolve = (ref: unknown) => unknown;

const ANNOTATIONS = new Set([
  "title",
  "description",
  "default",
  "examples",
  "$comment",
  "$schema",
  "$id",
  "$anchor",
  "deprecated",
  "readOnly",
  "writeOnly",
]);
const STRING_KEYWORDS = ["minLength", "maxLength", "pattern", "format"];
const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"];
const ARRAY_KEYWORDS = ["items", "prefixItems", "minItems", "maxItems", "uniqueItems"];
const OBJECT_KEYWORDS = ["minProperties", "maxProperties"];
/** Keywords whose schema is a subschema map or list the walk rewrites in place. */
const SCHEMA_MAPS = ["properties", "$defs", "definitions"];
const SCHEMA_LISTS = ["anyOf", "prefixItems"];
const MAX_MERGE_DEPTH = 16;

const isSchema = (s: unknown): s is Schema => typeof s === "object" && s !== null && !Array.isArray(s);

export interface NormalizeOptions {
  /**
   * Objects whose schema allows extra properties stay open where that is exact (openObject):
   * only for a backend that keeps extra names apart from the declared ones (schema-support.ts
   * backendJsonSchema splices that rule); otherwise every object with declared properties is closed.
   */
  openObjects?: boolean;
  /**
   * Objects keyed by one pattern keep it (patternKeyed); false: closed to no names, as other
   * patternProperties are (for a schema whose pattern values the backend cannot enforce).
   */
  patternKeys?: boolean;
}

/** The schema rewritten (a new tree; the input is not changed). */
export function normalizeSchema(schema: unknown, options: NormalizeOptions = {}): unknown {
  const root = filterEnums(schema);
  if (!isSchema(root) || !refsResolve(root)) return root;
  const original: Resolve = (ref) => resolveLocal(root, ref);
  const done = new Map<unknown, unknown>();
  // Exact rewrites first (on open objects, so merges keep their meaning), then the closing pass.
  const norm = (s: unknown): unknown => {
    if (!isSchema(s)) return s;
    const cached = done.get(s);
    if (cached !== undefined) return cached;
    const out: Schema = { ...s };
    done.set(s, out);
    for (const k of [...SCHEMA_MAPS, "patternProperties"])
      if (isSchema(out[k]))
        out[k] = Object.fromEntries(Object.entries(out[k] as Schema).map(([n, v]) => [n, norm(v)]));
    for (const k of [...SCHEMA_LISTS, "allOf"])
      if (Array.isArray(out[k])) out[k] = (out[k] as unknown[]).map(norm);
    for (const k of ["items", "additionalProperties"]) if (k in out) out[k] = norm(out[k]);
    if (
      Array.isArray(s.oneOf) &&
      s.oneOf.length > 0 &&
      !("anyOf" in s) &&
      pairwiseDisjoint(s.oneOf, original)
    ) {
      out.anyOf = s.oneOf.map(norm);
      delete out.oneOf;
    }
    let r: Schema = narrow(out);
    if (Array.isArray(r.allOf)) {
      const { allOf, ...rest } = r;
      const merged = (allOf as unknown[]).reduce<Schema | undefined>((acc, b) => {
        if (!acc || b === true) return acc;
        const m = isSchema(b) ? merge(acc, b, normalized, 0) : undefined;
        return m === UNSATISFIABLE ? undefined : m;
      }, rest);
      if (merged) r = narrow(merged.allOf ? merged : (norm(merged) as Schema));
    }
    r = distributeAnyOf(r, normalized);
    done.set(s, r);
    return r;
  };
  const normalized: Resolve = (ref) => norm(resolveLocal(root, ref));
  return close(norm(root), options.openObjects === true, options.patternKeys !== false);
}

/** Every local $ref of the schema points somewhere (else nothing is rewritten). */
function refsResolve(root: Schema): boolean {
  let ok = true;
  JSON.stringify(root, (k, v) => {
    if (k === "$ref" && resolveLocal(root, v) === undefined) ok = false;
    return v;
  });
  return ok;
}

/** The closing pass (openObject, else closeObject) over every subschema position. */
function close(s: unknown, open: boolean, keyed: boolean): unknown {
  if (!isSchema(s)) return s;
  const out: Schema = { ...s };
  const sub = (x: unknown) => close(x, open, keyed);
  for (const k of [...SCHEMA_MAPS, "patternProperties"])
    if (isSchema(out[k]))
      out[k] = Object.fromEntries(Object.entries(out[k] as Schema).map(([n, v]) => [n, sub(v)]));
  for (const k of [...SCHEMA_LISTS, "allOf", "oneOf"])
    if (Array.isArray(out[k])) out[k] = (out[k] as unknown[]).map(sub);
  for (const k of ["items", "additionalProperties"]) if (k in out) out[k] = sub(out[k]);
  const flat = withoutDependencies(out);
  return withoutNot((open && openObject(flat)) || closeObject(flat, keyed));
}

/** Keywords beside which an open object's extra properties would not be enforced exactly. */
const KEEP_CLOSED = [
  "patternProperties",
  "propertyNames",
  "minProperties",
  "maxProperties",
  "not",
  "dependentSchemas",
  "dependencies",
  "unevaluatedProperties",
  "if",
];

/**
 * An object that allows extra properties, left open (exact): its `additionalProperties` made
 * explicit (the backend's strict mode reads absent as false) and a `required` name not declared
 * declared with the extra-properties schema. The backend then generates the declared properties
 * in their order, then extra ones whose names are none of the declared (backendJsonSchema's key
 * rule). Undefined where that would not be exact: counts of properties (a repeated extra name
 * counts twice for the grammar, once in the parsed object), names matched by patterns or
 * constrained, `not` (narrowed by dropping declared names from a closed object), dependent
 * schemas, and declared names outside printable ASCII, which the key rule does not spell out.
 */
function openObject(s: Schema): Schema | undefined {
  const extra = s.additionalProperties;
  if (extra === false || KEEP_CLOSED.some((k) => k in s)) return undefined;
  const props = isSchema(s.properties) ? (s.properties as Schema) : undefined;
  const required = Array.isArray(s.required) ? (s.required as unknown[]) : [];
  if (!props && required.length === 0) {
    // An object of any names: XGrammar's own extra key (any string) is exact with none declared.
    const types = Array.isArray(s.type) ? s.type : [s.type];
    return types.includes("object") && extra === undefined ? { ...s, additionalProperties: true } : undefined;
  }
  const declared: Schema = { ...(props ?? {}) };
  for (const r of required)
    if (typeof r === "string" && !Object.hasOwn(declared, r))
      declared[r] = extra === undefined ? true : extra;
  if (!Object.keys(declared).every(spelledByKeyRule)) return undefined;
  return { ...s, properties: declared, additionalProperties: extra === undefined ? true : extra };
}

/**
 * A declared name the extra-name rule can exclude: printable ASCII. A name holding a quote, a
 * backslash or a control character needs an escape, which extra names never have, so it cannot
 * collide and is fine too; a non-ASCII one is not.
 */
export function spelledByKeyRule(name: string): boolean {
  for (let i = 0; i < name.length; i++) if (name.charCodeAt(i) > 0x7e) return false;
  return true;
}

/**
 * dependentRequired (and draft-4 dependencies of names) narrowed to required: every dependent
 * name is always present, so it is present whenever the name it depends on is.
 */
function withoutDependencies(s: Schema): Schema {
  const deps = (k: string) =>
    isSchema(s[k]) &&
    Object.values(s[k] as Schema).every((v) => Array.isArray(v) && v.every((n) => typeof n === "string"))
      ? Object.values(s[k] as Schema).flat()
      : undefined;
  const out: Schema = { ...s };
  for (const k of ["dependentRequired", "dependencies"]) {
    const names = deps(k);
    if (!names) continue;
    out.required = [...new Set([...(Array.isArray(out.required) ? out.required : []), ...names])];
    delete out[k];
  }
  return out;
}

/**
 * `not` over property presence, values or types, narrowed where the object is closed: `not`
 * {required: [a, b]} (or an allOf of such) drops one of the names from the declared properties,
 * an anyOf of them drops all; `not` {enum} / {const} filters the schema's own enum; `not` {type}
 * removes types from a stated type list. Anything else stays for the checker to refuse.
 */
function withoutNot(s: Schema): Schema {
  if (!isSchema(s.not)) return s;
  const not = s.not as Schema;
  const keys = Object.keys(not).filter((k) => !ANNOTATIONS.has(k));
  const out: Schema = { ...s };
  delete out.not;
  const names = (x: unknown): string[] | undefined => {
    if (!isSchema(x)) return undefined;
    const ks = Object.keys(x).filter((k) => !ANNOTATIONS.has(k));
    return ks.length === 1 && ks[0] === "required" && Array.isArray(x.required) && x.required.length > 0
      ? (x.required as string[])
      : undefined;
  };
  const dropProperties = (drop: string[]): Schema => {
    if (out.additionalProperties !== false || !isSchema(out.properties)) return s;
    const required = new Set(Array.isArray(out.required) ? (out.required as string[]) : []);
    if (drop.some((n) => required.has(n))) return s;
    const props = { ...(out.properties as Schema) };
    for (const n of drop) delete props[n];
    out.properties = props;
    return out;
  };
  if (keys.length !== 1) return s;
  const k = keys[0]!;
  if (k === "required") {
    const required = new Set(Array.isArray(out.required) ? (out.required as string[]) : []);
    const all = names(not)!;
    const free = all.find((n) => !required.has(n));
    return free === undefined ? s : dropProperties([free]);
  }
  if ((k === "allOf" || k === "anyOf") && Array.isArray(not[k])) {
    const lists = (not[k] as unknown[]).map(names);
    if (lists.some((l) => l === undefined)) return s;
    if (k === "anyOf") return dropProperties((lists as string[][]).flat());
    const required = new Set(Array.isArray(out.required) ? (out.required as string[]) : []);
    const free = (lists as string[][]).flat().find((n) => !required.has(n));
    return free === undefined ? s : dropProperties([free]);
  }
  if ((k === "enum" || k === "const") && Array.isArray(out.enum)) {
    const banned =
      k === "const" ? [not.const] : Array.isArray(not.enum) ? (not.enum as unknown[]) : undefined;
    if (!banned) return s;
    out.enum = (out.enum as unknown[]).filter((v) => !banned.some((b) => canonical(b) === canonical(v)));
    return (out.enum as unknown[]).length > 0 ? out : s;
  }
  if (k === "type" && "type" in out) {
    const banned = (Array.isArray(not.type) ? not.type : [not.type]) as string[];
    const types = ((Array.isArray(out.type) ? out.type : [out.type]) as string[]).filter(
      (t) => !banned.includes(t) && !(t === "integer" && banned.includes("number")),
    );
    // number minus integer is not a type the backend has.
    if (types.includes("number") && banned.includes("integer")) return s;
    if (types.length === 0) return s;
    out.type = types.length === 1 ? types[0] : types;
    return out;
  }
  return s;
}

/** Assertions beside `anyOf` (or `$ref`) merged into each branch, so the backend sees them combined. */
function distributeAnyOf(s: Schema, resolve: Resolve): Schema {
  const beside = Object.keys(s).filter(
    (k) => !ANNOTATIONS.has(k) && k !== "anyOf" && !SCHEMA_MAPS.slice(1).includes(k),
  );
  if (beside.length === 0) return s;
  if ("$ref" in s && !("anyOf" in s)) {
    if (beside.length === 1) return s;
    const { $ref, ...rest } = s;
    const merged = merge(rest, { $ref }, resolve, 0);
    return merged && merged !== UNSATISFIABLE ? narrow(merged) : s;
  }
  if (!Array.isArray(s.anyOf)) return s;
  const rest: Schema = {};
  const keep: Schema = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === "anyOf") continue;
    if (ANNOTATIONS.has(k) || k === "$defs" || k === "definitions") keep[k] = v;
    else rest[k] = v;
  }
  const branches: Schema[] = [];
  for (const b of s.anyOf) {
    if (b === true) {
      branches.push(rest);
      continue;
    }
    const m = isSchema(b) ? merge(rest, b, resolve, 0) : undefined;
    if (m === undefined) return s;
    if (m !== UNSATISFIABLE) branches.push(narrow(m));
  }
  if (branches.length === 0) return s;
  return { ...keep, anyOf: branches };
}

/** Narrowings that are exact as subsets: each instance kept satisfies the original keyword. */
function narrow(s: Schema): Schema {
  const out: Schema = { ...s };
  // additionalItems applies only beside an items array (drafts 4 to 2019-09): else it asserts nothing.
  if ("additionalItems" in out && !Array.isArray(out.items)) delete out.additionalItems;
  // A typed keyword without its type asserts nothing of other types: keep to that type.
  if (!("type" in out) && !("$ref" in out) && !("anyOf" in out) && !("enum" in out) && !("const" in out)) {
    const kinds = (
      [
        ["string", STRING_KEYWORDS],
        ["integer", NUMBER_KEYWORDS],
        ["array", ARRAY_KEYWORDS],
        ["object", OBJECT_KEYWORDS],
      ] as const
    ).filter(([, ks]) => ks.some((k) => k in out));
    if (kinds.length === 1) out.type = kinds[0]![0] === "integer" ? "number" : kinds[0]![0];
  }
  // Keywords of a type the schema excludes assert nothing.
  if ("type" in out) {
    const types = (Array.isArray(out.type) ? out.type : [out.type]) as unknown[];
    const kinds: [string[], string[]][] = [
      [["string"], STRING_KEYWORDS],
      [["integer", "number"], NUMBER_KEYWORDS],
      [["array"], ARRAY_KEYWORDS],
      [["object"], OBJECT_KEYWORDS],
    ];
    for (const [ts, ks] of kinds)
      if (!types.some((t) => ts.includes(t as string))) for (const k of ks) delete out[k];
  }
  // Items of any kind, said outright: the backend's strict mode reads absent items as none.
  if (
    !("items" in out) &&
    !("enum" in out) &&
    !("const" in out) &&
    (Array.isArray(out.type) ? out.type : [out.type]).includes("array")
  )
    out.items = true;
  // An array of at most one item has unique items.
  if (out.uniqueItems === true && (out.minItems === undefined || (out.minItems as number) <= 1)) {
    delete out.uniqueItems;
    out.maxItems = Math.min(typeof out.maxItems === "number" ? out.maxItems : 1, 1);
  }
  return out;
}

/**
 * Objects closed to their declared properties (a narrowing): a required name not declared is
 * declared with the schema extra properties had; names a patternProperties regex matches keep
 * that schema too, when none of the declared names matches one.
 */
function closeObject(s: Schema, keyed: boolean): Schema {
  const byPattern = keyed && patternKeyed(s);
  if (byPattern) return byPattern;
  const out: Schema = { ...s };
  // Objects closed to their declared properties; a required name not declared is declared with
  // the schema extra properties had.
  const required = Array.isArray(out.required) ? (out.required as unknown[]) : [];
  const props = isSchema(out.properties) ? { ...(out.properties as Schema) } : undefined;
  const extra = out.additionalProperties;
  if (extra !== false && !("patternProperties" in out) && (props || required.length > 0)) {
    const declared: Schema = props ?? {};
    for (const r of required)
      if (typeof r === "string" && !Object.hasOwn(declared, r))
        declared[r] = extra === undefined ? true : extra;
    out.properties = declared;
    out.additionalProperties = false;
  }
  // Declared properties whose names a patternProperties regex matches take that schema too;
  // other names are not generated.
  if (isSchema(out.patternProperties) && !("propertyNames" in out)) {
    const declared = isSchema(out.properties) ? { ...(out.properties as Schema) } : {};
    let ok = true;
    for (const [pattern, sub] of Object.entries(out.patternProperties as Schema)) {
      let re: RegExp;
      try {
        re = new RegExp(pattern, "u");
      } catch {
        ok = false;
        break;
      }
      if (sub !== true && Object.keys(declared).some((name) => re.test(name))) ok = false;
    }
    for (const r of required)
      if (typeof r === "string" && !Object.hasOwn(declared, r)) {
        ok = false;
        break;
      }
    if (ok) {
      out.properties = declared;
      delete out.patternProperties;
      out.additionalProperties = false;
    }
  }
  return out;
}

/**
 * An object whose names all match one pattern, each value held to that pattern's schema, in the
 * one shape the backend enforces exactly: its keys spelled by the pattern, nothing declared beside
 * (the backend would drop declared properties), one pattern (a name matching two would be held to
 * one schema), no property counts (a repeated name counts twice). Names outside the pattern are
 * not generated (a narrowing where additionalProperties allowed them).
 */
export function patternKeyed(s: Schema): Schema | undefined {
  if (!isSchema(s.patternProperties)) return undefined;
  const entries = Object.entries(s.patternProperties as Schema);
  const type = Array.isArray(s.type) && s.type.length === 1 ? s.type[0] : s.type;
  if (entries.length !== 1 || type !== "object") return undefined;
  const declared = isSchema(s.properties) && Object.keys(s.properties as Schema).length > 0;
  const required = Array.isArray(s.required) && s.required.length > 0;
  if (declared || required || ["propertyNames", "minProperties", "maxProperties"].some((k) => k in s))
    return undefined;
  const pattern = entries[0]![0];
  if (unsupportedRegexFeature(pattern) || "refused" in forJsonString(pattern)) return undefined;
  const out: Schema = { ...s, additionalProperties: false };
  delete out.properties;
  delete out.required;
  return out;
}

/** A merge that proved the conjunction has no instance. */
const UNSATISFIABLE: Schema = Object.freeze({}) as Schema;

/**
 * The schema whose instances are exactly those of both, or undefined when that cannot be written
 * in the keywords merged here (the caller then leaves the allOf for the checker to refuse).
 */
function merge(a0: Schema, b0: Schema, resolve: Resolve, depth: number): Schema | undefined {
  if (depth > MAX_MERGE_DEPTH) return undefined;
  const a = inlineRef(a0, resolve);
  const b = inlineRef(b0, resolve);
  if (!a || !b) return undefined;
  const out: Schema = {};
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  const both = (k: string) => k in a && k in b;
  for (const k of keys) {
    const x = a[k];
    const y = b[k];
    if (!both(k)) {
      out[k] = k in a ? x : y;
      continue;
    }
    if (ANNOTATIONS.has(k)) out[k] = x;
    else if (k === "type") {
      const t = intersectTypes(x, y);
      if (t.length === 0) return UNSATISFIABLE;
      out.type = t.length === 1 ? t[0] : t;
    } else if (k === "required") out.required = [...new Set([...(x as unknown[]), ...(y as unknown[])])];
    else if (["minLength", "minItems", "minProperties", "minimum"].includes(k))
      out[k] = Math.max(x as number, y as number);
    else if (["maxLength", "maxItems", "maxProperties", "maximum"].includes(k))
      out[k] = Math.min(x as number, y as number);
    else if (k === "exclusiveMinimum" || k === "exclusiveMaximum") {
      if (typeof x !== "number" || typeof y !== "number") return undefined;
      out[k] = k === "exclusiveMinimum" ? Math.max(x, y) : Math.min(x, y);
    } else if (k === "items") {
      const m =
        x === true
          ? y
          : y === true
            ? x
            : isSchema(x) && isSchema(y)
              ? merge(x, y, resolve, depth + 1)
              : undefined;
      if (m === undefined || m === UNSATISFIABLE) return undefined;
      out.items = m;
    } else if (k === "properties" || k === "additionalProperties") continue;
    else if (canonical(x) === canonical(y)) out[k] = x;
    else if (k === "enum" || k === "const") continue;
    else return undefined;
  }
  // enum and const: the values in both.
  if ("enum" in a || "const" in a || "enum" in b || "const" in b) {
    const values = (s: Schema) =>
      "const" in s ? [s.const] : Array.isArray(s.enum) ? (s.enum as unknown[]) : undefined;
    const va = values(a);
    const vb = values(b);
    delete out.const;
    delete out.enum;
    const inBoth = va && vb ? va.filter((v) => vb.some((w) => canonical(v) === canonical(w))) : (va ?? vb)!;
    if (inBoth.length === 0) return UNSATISFIABLE;
    out.enum = inBoth;
  }
  // Properties: a name declared on one side only must also satisfy the other side's extra schema.
  if ("properties" in a || "properties" in b || "additionalProperties" in a || "additionalProperties" in b) {
    if ("patternProperties" in a || "patternProperties" in b) return undefined;
    const pa = (a.properties ?? {}) as Schema;
    const pb = (b.properties ?? {}) as Schema;
    const props: Schema = {};
    const required = new Set((out.required as string[] | undefined) ?? []);
    for (const name of new Set([...Object.keys(pa), ...Object.keys(pb)])) {
      const x = Object.hasOwn(pa, name) ? pa[name] : (a.additionalProperties ?? true);
      const y = Object.hasOwn(pb, name) ? pb[name] : (b.additionalProperties ?? true);
      const m = conjoin(x, y, resolve, depth);
      if (m === undefined) return undefined;
      if (m === false) {
        if (required.has(name)) return UNSATISFIABLE;
        continue;
      }
      props[name] = m;
    }
    if ("properties" in a || "properties" in b) out.properties = props;
    if ("additionalProperties" in a || "additionalProperties" in b) {
      const m = conjoin(a.additionalProperties ?? true, b.additionalProperties ?? true, resolve, depth);
      if (m === undefined) return undefined;
      out.additionalProperties = m;
    }
  }
  return out;
}

/** Two subschemas (or booleans) combined: false when either is false. */
function conjoin(x: unknown, y: unknown, resolve: Resolve, depth: number): unknown {
  if (x === false || y === false) return false;
  if (x === true) return y;
  if (y === true) return x;
  if (!isSchema(x) || !isSchema(y)) return undefined;
  const m = merge(x, y, resolve, depth + 1);
  return m === UNSATISFIABLE ? false : m;
}

/** A schema with its $ref replaced by the target's keywords merged with its own. */
function inlineRef(s: Schema, resolve: Resolve, depth = 0): Schema | undefined {
  if (!("$ref" in s)) return s;
  if (depth > MAX_MERGE_DEPTH) return undefined;
  const target = resolve(s.$ref);
  if (target === true) {
    const { $ref, ...rest } = s;
    return rest;
  }
  if (!isSchema(target)) return undefined;
  const { $ref, ...rest } = s;
  const t = inlineRef(target, resolve, depth + 1);
  if (!t) return undefined;
  if (Object.keys(rest).every((k) => ANNOTATIONS.has(k))) return { ...t, ...rest };
  const m = merge(t, rest, resolve, depth + 1);
  return m === UNSATISFIABLE ? undefined : m;
}

function intersectTypes(x: unknown, y: unknown): string[] {
  const xs = (Array.isArray(x) ? x : [x]) as string[];
  const ys = (Array.isArray(y) ? y : [y]) as string[];
  const out = new Set<string>();
  for (const t of xs)
    for (const u of ys) {
      if (t === u) out.add(t);
      else if ((t === "integer" && u === "number") || (t === "number" && u === "integer")) out.add("integer");
    }
  return [...out];
}

// ---- disjointness (on the original schemas) ----

const JSON_TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"];

function typeOfValue(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** The JSON types an instance of the schema can have (a superset), or all of them. */
function possibleTypes(s: Schema): Set<string> {
  let types = new Set(JSON_TYPES);
  if ("type" in s) {
    const list = (Array.isArray(s.type) ? s.type : [s.type]) as string[];
    types = new Set(list.flatMap((t) => (t === "number" ? ["number", "integer"] : [t])));
  }
  const values = "const" in s ? [s.const] : Array.isArray(s.enum) ? (s.enum as unknown[]) : undefined;
  if (values) {
    const vt = new Set(values.map(typeOfValue));
    types = new Set([...types].filter((t) => vt.has(t)));
  }
  return types;
}

function pairwiseDisjoint(branches: unknown[], resolve: Resolve): boolean {
  for (let i = 0; i < branches.length; i++)
    for (let j = i + 1; j < branches.length; j++)
      if (!disjoint(branches[i], branches[j], resolve, 0)) return false;
  return true;
}

/** True only when no instance can satisfy both schemas (false when unsure). */
export function disjoint(x: unknown, y: unknown, resolve: Resolve, depth: number): boolean {
  if (x === false || y === false) return true;
  if (!isSchema(x) || !isSchema(y) || depth > MAX_MERGE_DEPTH) return false;
  // Only the target of a $ref counts: drafts before 2019-09 ignore keywords beside it.
  if ("$ref" in x) return disjoint(resolve(x.$ref), y, resolve, depth + 1);
  if ("$ref" in y) return disjoint(y, x, resolve, depth);
  if (Array.isArray(x.anyOf) && x.anyOf.every((b) => disjoint(b, y, resolve, depth + 1))) return true;
  if (Array.isArray(x.oneOf) && x.oneOf.every((b) => disjoint(b, y, resolve, depth + 1))) return true;
  if (Array.isArray(x.allOf) && x.allOf.some((b) => disjoint(b, y, resolve, depth + 1))) return true;
  if (Array.isArray(y.anyOf) || Array.isArray(y.oneOf) || Array.isArray(y.allOf))
    return disjoint(y, withoutCombinators(x), resolve, depth + 1) || disjointSelf(x, y, resolve, depth);
  return disjointSelf(x, y, resolve, depth);
}

function withoutCombinators(s: Schema): Schema {
  const { anyOf, oneOf, allOf, $ref, ...rest } = s;
  return rest;
}

/** Disjoint by the schemas' own keywords (combinators aside). */
function disjointSelf(x: Schema, y: Schema, resolve: Resolve, depth: number): boolean {
  const tx = possibleTypes(x);
  const ty = possibleTypes(y);
  const common = [...tx].filter((t) => ty.has(t));
  if (common.length === 0) return true;
  const vx = "const" in x ? [x.const] : Array.isArray(x.enum) ? (x.enum as unknown[]) : undefined;
  const vy = "const" in y ? [y.const] : Array.isArray(y.enum) ? (y.enum as unknown[]) : undefined;
  if (vx && vy && !vx.some((v) => vy.some((w) => canonical(v) === canonical(w)))) return true;
  // Both admit objects only: a property one requires that the other forbids or types apart.
  if (common.length === 1 && common[0] === "object")
    return objectsDisjoint(x, y, resolve, depth) || objectsDisjoint(y, x, resolve, depth);
  return false;
}

function objectsDisjoint(x: Schema, y: Schema, resolve: Resolve, depth: number): boolean {
  const required = Array.isArray(x.required) ? (x.required as unknown[]) : [];
  const px = isSchema(x.properties) ? (x.properties as Schema) : {};
  const py = isSchema(y.properties) ? (y.properties as Schema) : {};
  if ("patternProperties" in y) return false;
  for (const name of required) {
    if (typeof name !== "string") continue;
    const inY = Object.hasOwn(py, name) ? py[name] : (y.additionalProperties ?? true);
    const inX = Object.hasOwn(px, name)
      ? px[name]
      : "patternProperties" in x
        ? true
        : (x.additionalProperties ?? true);
    if (inY === false) return true;
    if (inX !== true && inY !== true && disjoint(inX, inY, resolve, depth + 1)) return true;
  }
  return false;
}

/** JSON text with object keys sorted, so equal values compare equal. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x) =>
    isSchema(x)
      ? Object.fromEntries(
          Object.keys(x)
            .sort()
            .map((k) => [k, x[k]]),
        )
      : x,
  );
}

function resolveLocal(root: unknown, ref: unknown): unknown {
  if (typeof ref !== "string" || !(ref === "#" || ref.startsWith("#/"))) return undefined;
  let node: unknown = root;
  for (const raw of ref === "#" ? [] : ref.slice(2).split("/")) {
    const key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    if (!isSchema(node) && !Array.isArray(node)) return undefined;
    if (!(key in (node as object))) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}
