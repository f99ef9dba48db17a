/**
 * engine_xargs: extension parameters (strings, numbers or lists of them) keyed by name. The engine
 * defines none yet, so every key is rejected rather than silently ignored; an extension adds its key
 * and value schema to ENGINE_XARGS.
 */
import { unknownField } from "../errors.ts";
import {
  array,
  childPath,
  isArray,
  isString,
  number,
  type Schema,
  string,
  typeError,
  union,
} from "./schema.ts";

export type EngineXargValue = string | number | (string | number)[];

/** The engine_xargs keys this engine understands, each with its value schema. */
export const ENGINE_XARGS: { readonly [key: string]: Schema<EngineXargValue> } = {};

const xargScalar = union<string | number>(
  [
    { when: isString, schema: string() },
    { when: (v) => typeof v === "number" || typeof v === "bigint", schema: number() },
  ],
  "a string or a number",
);

const xargValue = union<EngineXargValue>(
  [
    { when: (v) => !Array.isArray(v), schema: xargScalar },
    { when: isArray, schema: array(xargScalar) },
  ],
  "a string, a number or an array of them",
);

// Shape checks first (a clear type error), then the key table.
export const engineXargsSchema: Schema<Record<string, EngineXargValue>> = {
  parse(value, path) {
    if (typeof value !== "object" || value === null || Array.isArray(value))
      throw typeError(path, "an object", value);
    const out: [string, EngineXargValue][] = [];
    for (const [key, v] of Object.entries(value)) {
      const p = childPath(path, key);
      xargValue.parse(v, p);
      if (!Object.hasOwn(ENGINE_XARGS, key)) throw unknownField(p);
      out.push([key, ENGINE_XARGS[key]!.parse(v, p)]);
    }
    return Object.fromEntries(out);
  },
  jsonSchema: () => ({
    type: "object",
    properties: Object.fromEntries(Object.entries(ENGINE_XARGS).map(([k, s]) => [k, s.jsonSchema()])),
    additionalProperties: false,
  }),
};
