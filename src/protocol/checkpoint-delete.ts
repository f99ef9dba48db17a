/** DELETE /v1/preview/models/{model_id}/checkpoints: the body (`steps`) and the answer's schema. */
import { requestObject } from "./json-body.ts";
import { array, integer, object, required } from "./schema.ts";

export const deleteCheckpointsRequestSchema = object(
  {
    steps: required(array(integer({ minimum: 0 }), { minItems: 1 }), {
      description: "Training steps of the checkpoints to remove.",
    }),
  },
  { description: "Checkpoints to remove, by step." },
);

export interface DeleteCheckpointsResponse {
  deleted_count: number;
  /** Requested steps the model has no checkpoint for, in request order. */
  not_found_steps: number[];
}

export const deleteCheckpointsResponseSchema = {
  type: "object",
  properties: {
    deleted_count: { type: "integer", description: "Checkpoints removed." },
    not_found_steps: {
      type: "array",
      items: { type: "integer" },
      description: "Requested steps the model has no checkpoint for.",
    },
  },
  required: ["deleted_count", "not_found_steps"],
};

/** The requested steps, each once, in request order (400 naming the field when malformed). */
export function parseDeleteCheckpoints(body: unknown): number[] {
  return [...new Set(deleteCheckpointsRequestSchema.parse(requestObject(body), "").steps)];
}
