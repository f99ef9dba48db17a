/**
 * GET /v1/preview/models/{model_id}/checkpoints as a pure function of the model and the raw query:
 * cursor pagination by step. The HTTP layer only turns thrown ApiErrors into responses.
 */
import { type ApiError, invalidRequest, notFound } from "../errors.ts";
import type { ServedModel } from "./registry.ts";

export interface CheckpointItem {
  id: string;
  step: number;
  metrics: Record<string, number>;
}

export interface CheckpointPage {
  object: "list";
  data: CheckpointItem[];
  has_more: boolean;
  first_id: string;
  last_id: string;
}

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;
const KNOWN = new Set(["after", "limit", "order"]);

/** A query value as one string; repeated parameters (arrays) and nested objects are errors. */
function single(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (typeof value === "string") return value;
  if (typeof value === "number" && name === "limit") return String(value);
  throw invalidRequest(`${name} must be given once, as a single value`, name);
}

function badLimit(got: string): ApiError {
  return invalidRequest(`limit must be an integer from 1 to ${MAX_LIMIT} (got "${got}")`, "limit");
}

function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  // Plain digits only: "1e1", "0x10", " 5" and "5.0" are not integers as written.
  if (!/^\d+$/.test(raw)) throw badLimit(raw);
  const limit = Number(raw);
  if (limit < 1 || limit > MAX_LIMIT) throw badLimit(raw);
  return limit;
}

export function listCheckpoints(model: ServedModel, query: Record<string, unknown>): CheckpointPage {
  const unknown = Object.keys(query).filter((k) => !KNOWN.has(k) && query[k] !== undefined);
  if (unknown.length > 0) {
    const names = unknown.join(", ");
    throw invalidRequest(`Unrecognized query parameter(s): ${names}`, unknown[0]!, "unknown_parameter");
  }
  const order = single(query, "order") ?? "asc";
  if (order !== "asc" && order !== "desc")
    throw invalidRequest(`order must be "asc" or "desc" (got "${order}")`, "order");
  const limit = parseLimit(single(query, "limit"));
  const after = single(query, "after");

  // model.checkpoints is sorted by step (unique) ascending.
  const ordered = order === "asc" ? model.checkpoints : model.checkpoints.toReversed();
  let start = 0;
  if (after !== undefined) {
    const cursor = after.toLowerCase();
    if (cursor === "") throw invalidRequest("after must name a checkpoint id, got an empty string", "after");
    const at = ordered.findIndex((c) => c.id === cursor);
    // A well-formed cursor naming no checkpoint of this model: the resource it names is not found.
    if (at < 0)
      throw notFound(
        `after: no checkpoint with id "${after}" in model ${model.id}`,
        "after",
        "checkpoint_not_found",
      );
    start = at + 1;
  }
  const page = ordered.slice(start, start + limit);
  return {
    object: "list",
    data: page.map((c) => ({ id: c.id, step: c.step, metrics: { ...c.metrics } })),
    has_more: start + limit < ordered.length,
    first_id: page[0]?.id ?? "",
    last_id: page.at(-1)?.id ?? "",
  };
}
