/**
 * Schemas of the request fields that carry their own rules (objects, unions, normalisations), kept
 * apart from the field table in chat-request.ts.
 */

import type { LogitBias } from "../core/sample/params.ts";
import {
  array,
  boolean,
  childPath,
  documented,
  type Infer,
  integer,
  isArray,
  isPlainObject,
  isString,
  jsonObject,
  literal,
  number,
  object,
  optional,
  required,
  type Schema,
  string,
  transform,
  typeError,
  union,
  valueError,
  withDefault,
} from "./schema.ts";
import { STRUCTURED_CONSTRAINTS } from "./structured-outputs.ts";

const nullable = { nullable: true };

export interface StreamOptions {
  include_usage: boolean;
  continuous_usage_stats: boolean;
}

export const streamOptionsSchema: Schema<StreamOptions> = object({
  include_usage: withDefault(boolean(), false, {
    ...nullable,
    description: "Send a usage chunk before [DONE].",
  }),
  continuous_usage_stats: withDefault(boolean(), false, {
    ...nullable,
    description: "With include_usage: usage on every chunk.",
  }),
});

const jsonSchemaFormat = object({
  name: required(string()),
  description: optional(string(), nullable),
  schema: optional(jsonObject(), nullable),
  strict: optional(boolean(), {
    ...nullable,
    description:
      "true: every object that leaves additionalProperties unset is closed (OpenAI's strict mode).",
  }),
});

/** json_schema goes with type "json_schema" only, and that type needs it. */
export const responseFormatSchema = documented(
  object({
    type: required(literal(["text", "json_object", "json_schema"])),
    json_schema: optional(jsonSchemaFormat, nullable),
  }),
  {
    if: { properties: { type: { const: "json_schema" } } },
    // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then/else keywords.
    then: { required: ["json_schema"], properties: { json_schema: { type: "object" } } },
    else: { properties: { json_schema: { type: "null" } } },
  },
);

export const toolSchema = object({
  type: required(literal(["function"])),
  function: required(
    object({
      name: required(string()),
      description: optional(string(), nullable),
      parameters: optional(jsonObject(), nullable),
      strict: optional(boolean(), nullable),
    }),
  ),
});

export type Tool = Infer<typeof toolSchema>;

/** Exactly one constraint, as structuredConstraint requires (null is absence). */
const oneConstraint = {
  oneOf: STRUCTURED_CONSTRAINTS.map((k) => ({
    required: [k],
    properties: { [k]: { not: { type: "null" } } },
  })),
};

export const structuredOutputsSchema = documented(
  object({
    json: optional(
      union<unknown>(
        [
          { when: isString, schema: string() },
          { when: (v) => typeof v === "object" && v !== null && !Array.isArray(v), schema: jsonObject() },
        ],
        "a string or an object",
      ),
      { ...nullable, description: "A JSON Schema, as an object or as its JSON text." },
    ),
    regex: optional(string(), nullable),
    choice: optional(documented(array(string()), { minItems: 1 }), nullable),
    grammar: optional(string(), nullable),
    json_object: optional(documented(boolean(), { const: true }), nullable),
    disable_fallback: withDefault(boolean(), false, nullable),
    disable_any_whitespace: optional(boolean(), {
      ...nullable,
      description:
        "true: compact JSON (no whitespace outside strings); false: any. Absent: the model's default (structured_outputs in its ortserve.json), else any.",
    }),
    disable_additional_properties: withDefault(boolean(), false, nullable),
    whitespace_pattern: optional(string(), nullable),
    structural_tag: optional(string(), {
      ...nullable,
      description: "A structural tag (XGrammar's format) as its JSON text.",
    }),
    _backend: optional(string(), nullable),
    _backend_was_auto: withDefault(boolean(), false, nullable),
  }),
  oneConstraint,
);

export interface RepetitionDetectionParams {
  max_pattern_size: number;
  min_pattern_size: number;
  min_count: number;
}

export const repetitionDetectionSchema: Schema<RepetitionDetectionParams> = transform(
  object({
    max_pattern_size: withDefault(integer({ minimum: 0 }), 0, {
      description: "Longest pattern; 0 disables detection.",
    }),
    min_pattern_size: withDefault(integer({ minimum: 0 }), 0, {
      description: "Shortest pattern, at most max_pattern_size; 0 means 1.",
    }),
    min_count: withDefault(integer(), 0, {
      description: "Back-to-back copies that end generation; >= 2 when max_pattern_size > 0.",
    }),
  }),
  (r, path) => {
    if (r.max_pattern_size < 0 || r.min_pattern_size < 0 || r.min_pattern_size > r.max_pattern_size)
      throw valueError(
        path,
        "max_pattern_size and min_pattern_size must be >= 0, with min_pattern_size <= max_pattern_size. Set both to 0 to disable repetition detection.",
      );
    if (r.max_pattern_size > 0 && r.min_count < 2)
      throw valueError(
        childPath(path, "min_count"),
        "min_count must be >= 2 to detect repeated patterns; set max_pattern_size to 0 to disable detection.",
      );
    return r;
  },
);

const TOKEN_ID_KEY = /^\s*[+-]?\d+\s*$/;

/**
 * "0", or up to 15 digits without a leading zero (a double holds them exactly): the one spelling of
 * its id, so no other key of the same object names that id.
 */
function isCanonicalId(key: string): boolean {
  if (key.length === 0 || key.length > 15) return false;
  if (key.length > 1 && key.charCodeAt(0) === 48) return false;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/** Keys named in an error before the rest are counted (a bias map may have a vocabulary's entries). */
const KEYS_NAMED = 10;

/**
 * Token id → bias, clamped to [-100, 100] (vLLM); later keys win over equal ids. One pass over the
 * object into two flat arrays, without a path, a regex or an entry array per key: a map with a
 * vocabulary's entries is parsed on the thread that serves every stream's chunks, often by code
 * not yet compiled, so the loop is kept plain.
 */
export const logitBiasSchema: Schema<LogitBias> = {
  parse(input, path) {
    if (!isPlainObject(input)) throw typeError(path, "an object", input);
    const keys = Object.keys(input);
    const ids: number[] = [];
    const biases: number[] = [];
    const bad: string[] = [];
    let canonical = true;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      if (!isCanonicalId(key)) {
        if (!TOKEN_ID_KEY.test(key)) {
          bad.push(key);
          continue;
        }
        canonical = false;
      }
      const value = input[key];
      const v =
        typeof value === "number" && Number.isFinite(value)
          ? value
          : number().parse(value, childPath(path, key.trim()));
      ids.push(Number(key));
      biases.push(Math.min(100, Math.max(-100, v)));
    }
    if (bad.length) {
      const named = bad.slice(0, KEYS_NAMED).map((k) => JSON.stringify(k));
      if (bad.length > KEYS_NAMED) named.push(`and ${bad.length - KEYS_NAMED} more`);
      throw valueError(path, `keys must be integer token ids, but got ${named.join(", ")}.`);
    }
    // Canonical keys are distinct ids already; " 7", "+7" and "07" may repeat one, and the later wins.
    if (canonical) return { ids, biases };
    const byId = new Map<number, number>();
    for (let i = 0; i < ids.length; i++) byId.set(ids[i]!, biases[i]!);
    return { ids: [...byId.keys()], biases: [...byId.values()] };
  },
  jsonSchema: () => ({
    type: "object",
    propertyNames: { pattern: TOKEN_ID_KEY.source },
    additionalProperties: { type: "number" },
  }),
};

export const stopSchema: Schema<string[]> = documented(
  transform(
    union<string[]>(
      [
        { when: isString, schema: transform(string(), (s) => [s]) },
        { when: isArray, schema: array(string()) },
      ],
      "a string or an array of strings",
    ),
    (stop, path) => {
      if (stop.some((s) => s === "")) throw valueError(path, "stop strings must not be empty.");
      return stop;
    },
  ),
  {
    anyOf: [
      { type: "string", minLength: 1 },
      { type: "array", items: { type: "string", minLength: 1 } },
    ],
  },
);

/**
 * The rules across fields every generation route checks (checkSharedRules), as JSON Schema:
 * stream_options only with stream, prompt_logprobs other than 0 only without stream.
 */
export const SHARED_RULES_DOC = [
  {
    anyOf: [
      { properties: { stream_options: { type: "null" } } },
      { properties: { stream: { const: true } }, required: ["stream"] },
    ],
  },
  {
    anyOf: [
      { properties: { prompt_logprobs: { enum: [0, null] } } },
      { properties: { stream: { enum: [false, null] } } },
    ],
  },
];

const CACHE_SALT_FORBIDDEN = /[@/\\\0]/;

export const cacheSaltSchema = documented(
  transform(string(), (salt, path) => {
    // Counted in code points, as JSON Schema's maxLength counts.
    if (salt === "" || CACHE_SALT_FORBIDDEN.test(salt) || [...salt].length > 128)
      throw valueError(
        path,
        "must be a non-empty string of at most 128 characters without '@', '/', '\\' or NUL.",
      );
    return salt;
  }),
  { minLength: 1, maxLength: 128, pattern: "^[^@/\\\\\\u0000]+$" },
);
