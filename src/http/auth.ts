/**
 * API keys on every /v1 route (OPTIONS exempt) as `Authorization: Bearer <key>`, and on the
 * Anthropic routes also as Anthropic's clients send them, `x-api-key: <key>` (Authorization wins
 * when both are sent), and the optional project header for usage
 * tracking: `Compat-Project: <team>/<project>`, or `OpenAI-Project` as the official SDKs send it
 * (a project id alone, or `<team>/<project>`).
 */
import type { NextFunction, Request, Response } from "express";
import { unauthorized } from "../errors.ts";
import type { Caller } from "../serving/context.ts";
import type { ApiKeys } from "../storage/api-keys.ts";
import { parseOpenAIProjectHeader, parseProjectHeader } from "../storage/usage.ts";

export type { Caller };

declare module "express-serve-static-core" {
  interface Request {
    caller?: Caller;
    requestId?: string;
  }
}

const BEARER = /^bearer\s+(\S+)\s*$/i;

/** `acceptsApiKeyHeader`: the paths where `x-api-key` carries the key too. */
export function authenticate(keys: ApiKeys, acceptsApiKeyHeader: (path: string) => boolean = () => false) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    if (req.method === "OPTIONS") {
      next();
      return;
    }
    const bearer = req.get("authorization");
    const header = bearer ?? (acceptsApiKeyHeader(req.path) ? req.get("x-api-key") : undefined);
    const token = bearer !== undefined ? BEARER.exec(bearer)?.[1] : header?.trim() || undefined;
    const key = token ? keys.verifyKey(token) : undefined;
    if (!key) {
      next(
        unauthorized(
          header
            ? "Invalid API key."
            : acceptsApiKeyHeader(req.path)
              ? "Missing API key. Send `x-api-key: <key>` or `Authorization: Bearer <key>`."
              : undefined,
        ),
      );
      return;
    }
    // Known before the project header is checked, so a refused request is still attributed to its key.
    req.caller = { keyId: key.id, team: null, project: null };
    const compat = req.get("Compat-Project");
    const sdk = req.get("OpenAI-Project");
    try {
      // Compat-Project wins when both are sent; each is still checked (a bad value is a 400, not ignored).
      const fromSdk = sdk !== undefined ? parseOpenAIProjectHeader(sdk) : undefined;
      const { team, project } =
        compat !== undefined ? parseProjectHeader(compat) : (fromSdk ?? { team: null, project: null });
      req.caller = { keyId: key.id, team, project };
    } catch (err) {
      next(err);
      return;
    }
    next();
  };
}
