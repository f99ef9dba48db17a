/**
 * A small schema layer. Each schema parses an unknown JSON value into a typed one, throwing an
 * ApiError that names the offending path (`messages[2].content`), and describes itself as JSON
 * Schema — so request validation and the OpenAPI document come from the same objects.
 *
 * Objects are strict: a key the schema does not list is an `unknownField` error, as OpenAI does.
 */
import { type ApiError, invalidRequest, unknownField, unsupportedField } from "../errors.ts";
import { codePointLength } from "../util/code-points.ts";

export type JsonSchema = { [key: string]: unknown };

export interface Schema<T> {
  parse(value: unknown, path: string): T;
  jsonSchema(): JsonSchema;
}

export type Infer<S> = S extends Schema<infer T> ? T : never;

// ---- paths and errors ----

export function childPath(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

export function indexPath(path: string, index: number): string {
  return `${path}[${index}]`;
}

function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "string":
      return "a string";
    case "boolean":
      return "a boolean";
    case "bigint":
      return "an integer";
    case "number":
      return Number.isInteger(value) ? "an integer" : "a number";
    case "object":
      return "an object";
    default:
      return typeof value;
  }
}

export function typeError(path: string, expected: string, value: unknown): ApiError {
  return invalidRequest(
    `Invalid type for '${path}': expected ${expected}, but got ${describeValue(value)} instead.`,
    path,
    "invalid_type",
  );
}

export function valueError(path: string, problem: string): ApiError {
  return invalidRequest(`Invalid '${path}': ${problem}`, path);
}

export function missingError(path: string): ApiError {
  return invalidRequest(`Missing required parameter: '${path}'.`, path, "missing_required_parameter");
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

// ---- scalars ----

export function string(opts: { minLength?: number; maxLength?: number } = {}): Schema<string> {
  return {
    parse(value, path) {
      if (typeof value !== "string") throw typeError(path, "a string", value);
      // UTF-16 units bound the count from above: it is only taken where they do not decide.
      if (
        opts.minLength !== undefined &&
        value.length < 2 * opts.minLength &&
        codePointLength(value) < opts.minLength
      )
        throw valueError(path, `expected a string of at least ${opts.minLength} characters.`);
      if (
        opts.maxLength !== undefined &&
        value.length > opts.maxLength &&
        codePointLength(value) > opts.maxLength
      )
        throw valueError(path, `expected a string of at most ${opts.maxLength} characters.`);
      return value;
    },
    jsonSchema: () => ({ type: "string", minLength: opts.minLength, maxLength: opts.maxLength }),
  };
}

export function boolean(): Schema<boolean> {
  return {
    parse(value, path) {
      if (typeof value !== "boolean") throw typeError(path, "a boolean", value);
      return value;
    },
    jsonSchema: () => ({ type: "boolean" }),
  };
}

export interface NumberRange {
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
}

function checkRange(value: number, range: NumberRange, path: string): void {
  const fail = (bound: string) => valueError(path, `expected a value ${bound}, but got ${value} instead.`);
  if (range.minimum !== undefined && value < range.minimum) throw fail(`>= ${range.minimum}`);
  if (range.maximum !== undefined && value > range.maximum) throw fail(`<= ${range.maximum}`);
  if (range.exclusiveMinimum !== undefined && value <= range.exclusiveMinimum)
    throw fail(`> ${range.exclusiveMinimum}`);
  if (range.exclusiveMaximum !== undefined && value >= range.exclusiveMaximum)
    throw fail(`< ${range.exclusiveMaximum}`);
}

/** A finite number; a BigInt (from an exact-integer JSON parse) is taken as its nearest number. */
export function number(range: NumberRange = {}): Schema<number> {
  return {
    parse(value, path) {
      const n = typeof value === "bigint" ? Number(value) : value;
      if (typeof n !== "number" || !Number.isFinite(n)) throw typeError(path, "a number", value);
      checkRange(n, range, path);
      return n;
    },
    jsonSchema: () => ({ type: "number", ...range }),
  };
}

/** An integer that JavaScript represents exactly (|n| <= 2^53 - 1). */
export function integer(range: { minimum?: number; maximum?: number } = {}): Schema<number> {
  const bounds = {
    minimum: range.minimum ?? Number.MIN_SAFE_INTEGER,
    maximum: range.maximum ?? Number.MAX_SAFE_INTEGER,
  };
  return {
    parse(value, path) {
      const n = typeof value === "bigint" ? Number(value) : value;
      if (typeof n !== "number" || !Number.isInteger(n)) throw typeError(path, "an integer", value);
      checkRange(n, bounds, path);
      return n;
    },
    // The bounds parse enforces, safe-integer ones included, so the document bounds what the server does.
    jsonSchema: () => ({ type: "integer", minimum: bounds.minimum, maximum: bounds.maximum }),
  };
}

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

/**
 * A signed 64-bit integer as a BigInt. Exact only when the JSON was parsed with exact integers
 * (see json-body.ts); a plain number beyond 2^53 is taken at its (rounded) value.
 */
export function int64(opts: { minimum?: bigint } = {}): Schema<bigint> {
  const min = opts.minimum ?? INT64_MIN;
  return {
    parse(value, path) {
      let n: bigint;
      if (typeof value === "bigint") n = value;
      else if (typeof value === "number" && Number.isInteger(value)) n = BigInt(value);
      else throw typeError(path, "an integer", value);
      if (n < min || n > INT64_MAX)
        throw valueError(path, `expected an integer in [${min}, ${INT64_MAX}], but got ${n} instead.`);
      return n;
    },
    // JSON numbers: the bounds print rounded (9223372036854776000), as JSON Schema tools show them.
    jsonSchema: () => ({
      type: "integer",
      format: "int64",
      minimum: Number(min),
      maximum: Number(INT64_MAX),
    }),
  };
}

/**
 * A field the server names but cannot serve: any value is a 400 saying why (with `nullable`, null
 * is the field's absence). Advertised as matching nothing, so the document allows only its absence.
 */
export function refused(why: string): Schema<never> {
  return {
    parse(_value, path) {
      throw unsupportedField(path, why);
    },
    jsonSchema: () => ({ not: {} }),
  };
}

/** Adds JSON Schema keywords to a schema's document without changing what it parses. */
export function documented<T>(schema: Schema<T>, extra: JsonSchema): Schema<T> {
  return { parse: schema.parse, jsonSchema: () => ({ ...schema.jsonSchema(), ...extra }) };
}

export function literal<const V extends string>(values: readonly V[]): Schema<V> {
  const expected = values.map((v) => JSON.stringify(v)).join(", ");
  return {
    parse(value, path) {
      if (typeof value !== "string")
        throw typeError(path, values.length === 1 ? expected : "a string", value);
      if (!(values as readonly string[]).includes(value))
        throw valueError(path, `expected one of ${expected}, but got ${JSON.stringify(value)} instead.`);
      return value as V;
    },
    jsonSchema: () =>
      values.length === 1 ? { type: "string", const: values[0] } : { type: "string", enum: [...values] },
  };
}

/** Any JSON value, passed through untouched. */
export function anyValue(): Schema<unknown> {
  return { parse: (value) => value, jsonSchema: () => ({}) };
}

// ---- containers ----

export function array<T>(item: Schema<T>, opts: { minItems?: number } = {}): Schema<T[]> {
  return {
    parse(value, path) {
      if (!Array.isArray(value)) throw typeError(path, "an array", value);
      if (opts.minItems !== undefined && value.length < opts.minItems)
        throw valueError(path, `expected an array with at least ${opts.minItems} item(s).`);
      // The item's path is spelled only for an item that fails: a 100,000-id prompt is parsed on
      // the thread that writes every stream's chunks. Parsing is pure, so the failing item is
      // simply parsed again to name itself.
      return value.map((v, i) => {
        try {
          return item.parse(v, path);
        } catch {
          return item.parse(v, indexPath(path, i));
        }
      });
    },
    jsonSchema: () => ({ type: "array", items: item.jsonSchema(), minItems: opts.minItems }),
  };
}

/** An object with arbitrary keys, every value parsed by `value`. */
export function record<T>(value: Schema<T>): Schema<Record<string, T>> {
  return {
    parse(input, path) {
      if (!isPlainObject(input)) throw typeError(path, "an object", input);
      // fromEntries defines own properties, so a "__proto__" key stays a plain key.
      return Object.fromEntries(
        Object.entries(input).map(([k, v]) => [k, value.parse(v, childPath(path, k))]),
      );
    },
    jsonSchema: () => ({ type: "object", additionalProperties: value.jsonSchema() }),
  };
}

/** A JSON object whose contents this server does not interpret. */
export function jsonObject(): Schema<Record<string, unknown>> {
  return record(anyValue());
}

// ---- object fields ----

export interface FieldMeta {
  description?: string;
  deprecated?: boolean;
  /** null is accepted and means the same as an absent field. */
  nullable?: boolean;
}

export interface Field<T> {
  readonly required: boolean;
  read(present: boolean, value: unknown, path: string): T;
  jsonSchema(): JsonSchema;
}

function fieldJsonSchema(schema: Schema<unknown>, meta: FieldMeta, extra: JsonSchema = {}): JsonSchema {
  let js = schema.jsonSchema();
  if (meta.nullable) {
    const t = js.type;
    js =
      typeof t === "string" && js.enum === undefined && js.const === undefined
        ? { ...js, type: [t, "null"] }
        : { anyOf: [js, { type: "null" }] };
  }
  return { ...js, ...extra, description: meta.description, deprecated: meta.deprecated || undefined };
}

export function required<T>(schema: Schema<T>, meta: FieldMeta = {}): Field<T> {
  return {
    required: true,
    read(present, value, path) {
      if (!present || (meta.nullable && value === null)) throw missingError(path);
      return schema.parse(value, path);
    },
    jsonSchema: () => fieldJsonSchema(schema, meta),
  };
}

export function optional<T>(schema: Schema<T>, meta: FieldMeta = {}): Field<T | undefined> {
  return {
    required: false,
    read(present, value, path) {
      if (!present || (meta.nullable && value === null)) return undefined;
      return schema.parse(value, path);
    },
    jsonSchema: () => fieldJsonSchema(schema, meta),
  };
}

/**
 * `fallback` is a value (advertised as the JSON Schema default; objects are copied per request so no
 * two requests share one) or a function called per request.
 */
export function withDefault<T>(schema: Schema<T>, fallback: T | (() => T), meta: FieldMeta = {}): Field<T> {
  const make =
    typeof fallback === "function"
      ? (fallback as () => T)
      : typeof fallback === "object" && fallback !== null
        ? () => structuredClone(fallback)
        : () => fallback;
  const advertised =
    typeof fallback === "function" || typeof fallback === "bigint" ? {} : { default: fallback };
  return {
    required: false,
    read(present, value, path) {
      if (!present || (meta.nullable && value === null)) return make();
      return schema.parse(value, path);
    },
    jsonSchema: () => fieldJsonSchema(schema, meta, advertised),
  };
}

export type Shape = { [key: string]: Field<unknown> };
export type ObjectOf<S extends Shape> = { [K in keyof S]: S[K] extends Field<infer T> ? T : never };

/**
 * A strict object: unknown keys are rejected, listed fields are read in shape order. Fields that
 * come out undefined are left off the result, so it holds only what the client set or a default.
 */
export function object<S extends Shape>(shape: S, opts: { description?: string } = {}): Schema<ObjectOf<S>> {
  return {
    parse(value, path) {
      if (!isPlainObject(value)) throw typeError(path, "an object", value);
      for (const key of Object.keys(value))
        if (!Object.hasOwn(shape, key)) throw unknownField(childPath(path, key));
      const out: Record<string, unknown> = {};
      for (const [key, field] of Object.entries(shape)) {
        const present = Object.hasOwn(value, key);
        const v = field.read(present, present ? value[key] : undefined, childPath(path, key));
        if (v !== undefined) out[key] = v;
      }
      return out as ObjectOf<S>;
    },
    jsonSchema() {
      const properties: JsonSchema = {};
      const requiredKeys: string[] = [];
      for (const [key, field] of Object.entries(shape)) {
        properties[key] = field.jsonSchema();
        if (field.required) requiredKeys.push(key);
      }
      return {
        type: "object",
        description: opts.description,
        properties,
        required: requiredKeys.length ? requiredKeys : undefined,
        additionalProperties: false,
      };
    },
  };
}

// ---- unions and adapters ----

/** A union chosen by the JSON type of the value (string vs array, ...): no backtracking, exact errors. */
export function union<T>(
  options: { when: (value: unknown) => boolean; schema: Schema<T> }[],
  expected: string,
): Schema<T> {
  return {
    parse(value, path) {
      const option = options.find((o) => o.when(value));
      if (!option) throw typeError(path, expected, value);
      return option.schema.parse(value, path);
    },
    jsonSchema: () => ({ anyOf: options.map((o) => o.schema.jsonSchema()) }),
  };
}

export const isString = (v: unknown): boolean => typeof v === "string";
export const isArray = (v: unknown): boolean => Array.isArray(v);

/**
 * An object union chosen by a string tag (`role`, `type`). `other` handles tags not listed: it
 * parses them (a catch-all variant) or throws. Only `variants` and a parsing `other` are advertised.
 */
export function tagged<T>(
  tag: string,
  variants: { [tag: string]: Schema<T> },
  other: { schema: Schema<T> } | { reject: (tag: string, tagPath: string) => ApiError },
): Schema<T> {
  return {
    parse(value, path) {
      if (!isPlainObject(value)) throw typeError(path, "an object", value);
      const tagPath = childPath(path, tag);
      if (!Object.hasOwn(value, tag)) throw missingError(tagPath);
      const t = value[tag];
      if (typeof t !== "string") throw typeError(tagPath, "a string", t);
      if (Object.hasOwn(variants, t)) return variants[t]!.parse(value, path);
      if ("schema" in other) return other.schema.parse(value, path);
      throw other.reject(t, tagPath);
    },
    jsonSchema() {
      const all = Object.values(variants).map((v) => v.jsonSchema());
      if ("schema" in other) all.push(other.schema.jsonSchema());
      return { anyOf: all };
    },
  };
}

/** Converts a parsed value (and may reject it with a path-aware error); the JSON Schema is unchanged. */
export function transform<T, U>(schema: Schema<T>, fn: (value: T, path: string) => U): Schema<U> {
  return {
    parse: (value, path) => fn(schema.parse(value, path), path),
    jsonSchema: () => schema.jsonSchema(),
  };
}

/** Drops keys whose value is undefined, recursively, so generated documents stay tidy. */
export function compactJson<T>(value: T): T {
  if (Array.isArray(value)) return value.map(compactJson) as T;
  if (isPlainObject(value))
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, compactJson(v)]),
    ) as T;
  return value;
}
