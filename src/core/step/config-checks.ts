/** Request checks that need only the engine's configuration: run in the worker, and early on the main thread. */
import { RequestError } from "../request-error.ts";
import type { EngineCoreConfig, EngineRequest } from "../types.ts";

/**
 * What can be checked against the engine's configuration alone, before the prompt is known. The
 * main thread runs it too (Engine.check), before it sizes anything by the request.
 */
export function checkAgainstConfig(req: EngineRequest, config: EngineCoreConfig): void {
  if (req.priority !== 0 && config.schedulingPolicy !== "priority")
    throw new RequestError(
      "priority_not_supported",
      `priority ${req.priority} was given, but model scheduling policy is "fcfs"; priority scheduling is not enabled for this model`,
      "priority",
    );
  if (req.n > config.maxNumSeqs)
    throw new RequestError("invalid_request", `n=${req.n} exceeds max_num_seqs=${config.maxNumSeqs}`, "n");
}
