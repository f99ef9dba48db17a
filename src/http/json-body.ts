/** Body parser that keeps the raw text (seed needs exact 64-bit integers) and insists on JSON. */
import express, { type NextFunction, type Request, type Response } from "express";
import { invalidRequest } from "../errors.ts";

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
    text(req, res, (err?: unknown) => {
      if (err) return next(err);
      const raw = typeof req.body === "string" ? req.body : "";
      try {
        req.body = { raw, value: JSON.parse(raw) as unknown } satisfies JsonBody;
      } catch (e) {
        return next(
          invalidRequest(`Request body is not valid JSON: ${(e as Error).message}`, null, "invalid_json"),
        );
      }
      next();
    });
  };
}
