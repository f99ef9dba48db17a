/** Body parser that keeps the raw text (seed needs exact 64-bit integers) and insists on JSON. */
import express, { type NextFunction, type Request, type Response } from "express";
import { invalidRequest } from "../errors.ts";
import { mainThreadTurns } from "../util/turns.ts";
import { BodyParseThread } from "./body-parse-thread.ts";
import { type ParsedBody, parseJsonText } from "./parse-json.ts";

export { MAX_JSON_DEPTH } from "./parse-json.ts";

/**
 * Bodies from this size on are parsed on the body parser's thread, at a lowered priority (parsing
 * and walking a few MB takes milliseconds, which would delay every stream's next chunk and step),
 * and validated here in a turn of their own (see Turns), so several arriving at once do not add
 * up in front of a stream's chunk. Ordinary requests are far below it and pay nothing.
 */
const LARGE_BODY_CHARS = 64 * 1024;

/** One per process, started by the first large body. */
const bodyParser = new BodyParseThread();

/** A large body parsed on the parser's thread; on this one, in a turn of its own, if that thread cannot. */
async function parseLarge(raw: string): Promise<ParsedBody> {
  try {
    return await bodyParser.parse(raw);
  } catch {
    await mainThreadTurns.next();
    return parseJsonText(raw);
  }
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
      const parsed = large ? await parseLarge(raw) : parseJsonText(raw);
      if ("refused" in parsed) {
        const { message, param, code } = parsed.refused;
        return next(invalidRequest(message, param, code));
      }
      const { value } = parsed;
      req.body = { raw, value } satisfies JsonBody;
      if (large) await mainThreadTurns.next();
      next();
    });
  };
}
