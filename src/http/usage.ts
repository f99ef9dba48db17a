/**
 * The one place usage rows are written. Routes that declare `usage` get a per-request recorder,
 * armed before authentication so requests refused on the way in (bad body, bad project header)
 * are counted too. A row is written once per request, before its response completes: by the
 * route when it answers, or by the error handler when it refuses. Rows that end in the same turn
 * of the event loop share one commit (UsageLog.commitUsage).
 */
import type { NextFunction, Request, Response } from "express";
import type { Logger } from "../observability/logger.ts";
import { newUsageTally, type UsageTally } from "../serving/context.ts";
import type { UsageRecord } from "../storage/usage.ts";

declare module "express-serve-static-core" {
  interface Request {
    usage?: RequestUsage;
  }
}

export interface UsageStore {
  /** Resolves once the row is committed to disk. */
  commitUsage(record: UsageRecord): Promise<void>;
}

/** Route metadata: which requests a usage row is armed for. */
export interface UsageRoute {
  method: string;
  path: string;
}

/** One request's usage row. */
export class RequestUsage {
  readonly tally: UsageTally;
  private readonly req: Request;
  private readonly store: UsageStore;
  private readonly logger: Logger;
  private startedAt?: number;
  private recorded = false;

  constructor(req: Request, store: UsageStore, logger: Logger) {
    this.req = req;
    this.store = store;
    this.logger = logger;
    this.tally = newUsageTally(req.requestId!);
  }

  /** The service took the request: latency counts from here (a refusal before it records 0). */
  start(): UsageTally {
    this.startedAt = performance.now();
    return this.tally;
  }

  /**
   * Writes the row (once; later calls do nothing) and resolves when it is on disk, so the response
   * can finish after it. Requests without a valid key write none. Never rejects: a row that cannot
   * be written is logged.
   */
  async record(status: number): Promise<void> {
    const caller = this.req.caller;
    if (this.recorded || !caller) return;
    this.recorded = true;
    const t = this.tally;
    try {
      await this.store.commitUsage({
        keyId: caller.keyId ?? undefined,
        team: caller.team ?? undefined,
        project: caller.project ?? undefined,
        model: t.model || "(unresolved)",
        checkpoint: t.checkpoint ?? undefined,
        requestId: t.requestId,
        promptTokens: t.promptTokens,
        completionTokens: t.completionTokens,
        cachedTokens: t.cachedTokens,
        latencyMs: this.startedAt === undefined ? 0 : Math.round(performance.now() - this.startedAt),
        status,
      });
    } catch (err) {
      this.logger.error("usage record failed", { request_id: t.requestId, error: String(err) });
    }
  }
}

export class UsageRecorder {
  private readonly store: UsageStore;
  private readonly logger: Logger;

  constructor(store: UsageStore, logger: Logger) {
    this.store = store;
    this.logger = logger;
  }

  /**
   * Before authentication: arms a row for requests to `routes` (by their declared method and
   * path; the route arms one too, for spellings Express also routes there).
   */
  armFor(routes: readonly UsageRoute[]) {
    return (req: Request, _res: Response, next: NextFunction): void => {
      if (routes.some((r) => r.method === req.method && r.path === req.path)) this.arm(req);
      next();
    };
  }

  /** In a route's chain: makes sure the request has its row. */
  readonly onRoute = (req: Request, _res: Response, next: NextFunction): void => {
    this.arm(req);
    next();
  };

  private arm(req: Request): void {
    req.usage ??= new RequestUsage(req, this.store, this.logger);
  }
}
