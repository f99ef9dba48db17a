/** Request id (X-Request-Id or generated), echoed on the response, and one JSON log line per request. */
import { randomUUID } from "node:crypto";
import type { NextFunction, Request, Response } from "express";
import type { Logger } from "../observability/logger.ts";
import type { Metrics } from "../observability/metrics.ts";

/** Route label for metrics: the matched route pattern, never the raw path (unbounded cardinality). */
function routeLabel(req: Request): string {
  const route = req.route as { path?: string } | undefined;
  return route?.path ? `${req.baseUrl}${route.path}` : "unmatched";
}

export function requestContext(logger: Logger, metrics: Metrics) {
  let inFlight = 0;
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = performance.now();
    req.requestId = req.get("x-request-id") || randomUUID().replaceAll("-", "");
    res.setHeader("X-Request-Id", req.requestId);
    metrics.inFlight.set(++inFlight);
    res.on("close", () => {
      metrics.inFlight.set(--inFlight);
      const labels = { route: routeLabel(req), method: req.method, status: String(res.statusCode) };
      metrics.requests.inc(labels);
      if (res.statusCode >= 400) metrics.errors.inc(labels);
      const seconds = (performance.now() - started) / 1000;
      metrics.latency.observe(seconds, { route: labels.route });
      logger.info("request", {
        request_id: req.requestId,
        method: req.method,
        path: req.originalUrl.split("?")[0],
        status: res.statusCode,
        duration_ms: Math.round(seconds * 1000),
        completed: res.writableFinished,
      });
    });
    next();
  };
}
