/**
 * Exact 64-bit integers from a JSON body. JSON.parse rounds integers beyond 2^53 (a seed of
 * 9223372036854775807 would come out as 2^63, out of range); the reviver's `context.source`
 * (Node 22+) still sees the digits, so top-level integer fields can be recovered exactly.
 */
import { invalidRequest } from "../errors.ts";

type Reviver = (this: unknown, key: string, value: unknown, context?: { source?: string }) => unknown;

const INTEGER_LITERAL = /^-?\d+$/;

/** True when some top-level field holds an integer that JSON.parse may have rounded. */
export function hasInexactIntegers(body: unknown): boolean {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  return Object.values(body).some(
    (v) => typeof v === "number" && Number.isInteger(v) && !Number.isSafeInteger(v),
  );
}

/**
 * The body with every top-level integer beyond 2^53 replaced by its exact BigInt, read from the raw
 * text. Nested values stay as parsed (their consumers pass them through as JSON).
 */
export function withExactIntegers(body: Record<string, unknown>, rawText: string): Record<string, unknown> {
  const exact = new WeakMap<object, Map<string, bigint>>();
  const reviver: Reviver = function (key, value, context) {
    const source = context?.source;
    if (typeof value === "number" && !Number.isSafeInteger(value) && source && INTEGER_LITERAL.test(source)) {
      const holder = this as object;
      const fields = exact.get(holder) ?? new Map<string, bigint>();
      fields.set(key, BigInt(source));
      exact.set(holder, fields);
    }
    return value;
  };
  let root: unknown;
  try {
    root = JSON.parse(rawText, reviver as (key: string, value: unknown) => unknown);
  } catch {
    return body;
  }
  const fields = typeof root === "object" && root !== null ? exact.get(root) : undefined;
  if (!fields) return body;
  return Object.fromEntries(Object.entries(body).map(([k, v]) => [k, fields.get(k) ?? v]));
}

/**
 * A request body as a JSON object, its top-level integers beyond 2^53 exact when the raw text is
 * given; anything but an object is a 400.
 */
export function requestObject(body: unknown, rawText?: string): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidRequest("The request body must be a JSON object.", null, "invalid_type");
  const object = body as Record<string, unknown>;
  return rawText !== undefined && hasInexactIntegers(object) ? withExactIntegers(object, rawText) : object;
}
