/** Body parser that keeps the raw text (seed needs exact 64-bit integers) and insists on JSON. */
import express, { type NextFunction, type Request, type Response } from "express";
import { invalidRequest } from "../errors.ts";
import { mainThreadTurns } from "../util/turns.ts";

/**
 * Bodies from this size on are parsed in a turn of their own and validated in the next (see
 * Turns): parsing and walking a few MB takes milliseconds, and several arriving at once must not
 * add up in front of a stream's chunk. Ordinary requests are far below it and pay nothing.
 */
const LARGE_BODY_CHARS = 64 * 1024;

/**
 * Deepest nesting a body may have. Real requests (tool schemas, kwargs) stay far below it; far
 * deeper values would overflow the stack of whatever walks them later (templates, the echo of a
 * field), so they are refused here, once, for every field.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * The top-level field (or null for the body itself) holding nesting beyond `max`, if any. Only
 * objects and arrays are visited (a 100,000-number array or a 50,000-key map costs one pass, no
 * allocation per item).
 */
function tooDeep(value: unknown, max: number): { at: string | null } | undefined {
  const stack: [object, number, string | null][] = [];
  const visit = (v: unknown, depth: number, field: string | null) => {
    if (typeof v === "object" && v !== null) stack.push([v, depth, field]);
  };
  visit(value, 0, null);
  while (stack.length > 0) {
    const [v, depth, field] = stack.pop()!;
    if (depth >= max) return { at: field };
    if (Array.isArray(v)) for (const child of v) visit(child, depth + 1, field);
    // for-in, not Object.entries: a 50,000-key map must not cost an entry array per key.
    else for (const k in v) visit((v as Record<string, unknown>)[k], depth + 1, field ?? k);
  }
  return undefined;
}

/**
 * Whether the text holds at least `n` opening brackets: nesting `n` deep needs as many, and a
 * megabyte of text or a 100,000-number array holds a handful, found by a scan far cheaper than a
 * walk of the parsed value.
 */
function bracketsAtLeast(text: string, n: number): boolean {
  let count = 0;
  for (const bracket of ["[", "{"])
    for (let i = text.indexOf(bracket); i !== -1; i = text.indexOf(bracket, i + 1))
      if (++count >= n) return true;
  return false;
}

/** What `jsonBody` leaves in `req.body`. */
export interface JsonBody {
  raw: string;
  value: unknown;
}

export function jsonBody(limit: number) {
  const text = express.text({ type: () => true, limit });
  return (req: Request, res: Response, next: NextFunction) => {
    const type = req.get("content-type") ?? "";
    if (!/^application\/json\s*(;|$)/i.test(type))
      return next(invalidRequest("Content-Type must be application/json.", null, "invalid_content_type"));
    text(req, res, async (err?: unknown) => {
      if (err) return next(err);
      const raw = typeof req.body === "string" ? req.body : "";
      const large = raw.length >= LARGE_BODY_CHARS;
      if (large) await mainThreadTurns.next();
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch (e) {
        return next(
          invalidRequest(`Request body is not valid JSON: ${(e as Error).message}`, null, "invalid_json"),
        );
      }
      const deep = bracketsAtLeast(raw, MAX_JSON_DEPTH) ? tooDeep(value, MAX_JSON_DEPTH) : undefined;
      if (deep)
        return next(
          invalidRequest(
            `${deep.at ?? "The request body"} is nested more than ${MAX_JSON_DEPTH} levels deep.`,
            deep.at,
            "nesting_too_deep",
          ),
        );
      req.body = { raw, value } satisfies JsonBody;
      if (large) await mainThreadTurns.next();
      next();
    });
  };
}
