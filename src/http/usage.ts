/**
 * The one place usage rows are written. Routes that declare `usage` get a per-request recorder,
 * armed before authentication so requests refused on the way in (bad body, bad project header)
 * are counted too. A row is written once per request, before its response completes: by the
 * route when it answers, or by the error handler when it refuses. Rows that end in the same turn
 * of the event loop share one commit (UsageLog.commitUsage).
 */
import type { NextFunction, Request, Response } from "express";
import { ApiError } from "../errors.ts";
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
  /** Whether a row could be written now (a probe that leaves nothing behind). */
  canWrite(): boolean | Promise<boolean>;
}

/** 503: usage cannot be recorded, so nothing is served (no unrecorded work). */
export function usageUnavailable(): ApiError {
  const err = new ApiError(
    503,
    "service_unavailable_error",
    "Usage records cannot be written right now (the usage database is not writable), so requests are not served.",
    null,
    "usage_unavailable",
  );
  err.retryAfterSeconds = 5;
  return err;
}

/** Shared by a recorder and its requests: set while the store refuses writes. */
interface StoreHealth {
  failing: boolean;
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
  private readonly health: StoreHealth;
  private startedAt?: number;
  private recorded = false;

  constructor(req: Request, store: UsageStore, logger: Logger, health: StoreHealth) {
    this.req = req;
    this.store = store;
    this.logger = logger;
    this.health = health;
    this.tally = newUsageTally(req.requestId!);
  }

  /** The service took the request: latency counts from here (a refusal before it records 0). */
  start(): UsageTally {
    this.startedAt = performance.now();
    return this.tally;
  }

  /**
   * Writes the row (once; later calls do nothing) and resolves when it is on disk, so the response
   * can finish after it. Requests without a valid key write none. Resolves false when the row
   * could not be written: the caller must not serve the response.
   */
  async record(status: number): Promise<boolean> {
    const caller = this.req.caller;
    if (this.recorded || !caller) return true;
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
      return true;
    } catch (err) {
      this.health.failing = true;
      this.logger.error("usage record failed", { request_id: t.requestId, error: String(err) });
      return false;
    }
  }
}

export class UsageRecorder {
  private readonly store: UsageStore;
  private readonly logger: Logger;
  private readonly health: StoreHealth = { failing: false };

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

  /**
   * In a route's chain: makes sure the request has its row, and fails closed (503) while rows
   * cannot be written; each request then probes the store, so service resumes once it can.
   */
  readonly onRoute = async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    this.arm(req);
    if (this.health.failing) {
      if (!(await this.store.canWrite())) {
        next(usageUnavailable());
        return;
      }
      if (this.health.failing) this.logger.info("usage records can be written again");
      this.health.failing = false;
    }
    next();
  };

  private arm(req: Request): void {
    req.usage ??= new RequestUsage(req, this.store, this.logger, this.health);
  }
}
