/**
 * A request body's text parsed as JSON and held to the nesting limit, with nothing of the server
 * in it: the same function runs on the main thread for ordinary bodies and on the body parser's
 * thread (body-parse-worker.ts) for large ones.
 */

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

/** Why a body is refused: the parts of a 400 (invalidRequest's message, param and code). */
export interface BodyRefusal {
  message: string;
  param: string | null;
  code: string;
}

export type ParsedBody = { value: unknown } | { refused: BodyRefusal };

export function parseJsonText(raw: string): ParsedBody {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (e) {
    return {
      refused: {
        message: `Request body is not valid JSON: ${(e as Error).message}`,
        param: null,
        code: "invalid_json",
      },
    };
  }
  const deep = bracketsAtLeast(raw, MAX_JSON_DEPTH) ? tooDeep(value, MAX_JSON_DEPTH) : undefined;
  if (deep)
    return {
      refused: {
        message: `${deep.at ?? "The request body"} is nested more than ${MAX_JSON_DEPTH} levels deep.`,
        param: deep.at,
        code: "nesting_too_deep",
      },
    };
  return { value };
}
