/**
 * Bearer API keys on every /v1 route (OPTIONS exempt), and the optional `<team>/<project>` header
 * for usage tracking (`Compat-Project`, or `OpenAI-Project` as the official SDKs send it).
 */
import type { NextFunction, Request, Response } from "express";
import { unauthorized } from "../errors.ts";
import type { Caller } from "../serving/context.ts";
import type { ApiKeys } from "../storage/api-keys.ts";
import { parseProjectHeader } from "../storage/usage.ts";

export type { Caller };

declare module "express-serve-static-core" {
  interface Request {
    caller?: Caller;
    requestId?: string;
  }
}

const BEARER = /^bearer\s+(\S+)\s*$/i;

export function authenticate(keys: ApiKeys) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    if (req.method === "OPTIONS") {
      next();
      return;
    }
    const header = req.get("authorization");
    const token = header ? BEARER.exec(header)?.[1] : undefined;
    const key = token ? keys.verifyKey(token) : undefined;
    if (!key) {
      next(unauthorized(header ? "Invalid API key." : undefined));
      return;
    }
    let team: string | null = null;
    let project: string | null = null;
    // Known before the project header is checked, so a refused request is still attributed to its key.
    req.caller = { keyId: key.id, team, project };
    for (const name of ["Compat-Project", "OpenAI-Project"]) {
      const value = req.get(name);
      if (value === undefined) continue;
      try {
        ({ team, project } = parseProjectHeader(value, name));
      } catch (err) {
        next(err);
        return;
      }
      break;
    }
    req.caller = { keyId: key.id, team, project };
    next();
  };
}
