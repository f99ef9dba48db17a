/**
 * The OpenAPI 3.1 document of the service. The chat completion request schema is generated from
 * the same schema objects that validate requests, so the two cannot drift.
 */
import { chatCompletionRequestSchema } from "./chat-request.ts";
import { deleteCheckpointsRequestSchema, deleteCheckpointsResponseSchema } from "./checkpoint-delete.ts";
import { completionRequestSchema } from "./completion-request.ts";
import { completionChunkSchema, completionResponseSchema } from "./completion-schemas.ts";
import {
  chatCompletionChunkSchema,
  chatCompletionResponseSchema,
  checkpointListSchema,
  errorSchema,
  healthSchema,
  modelListSchema,
} from "./response-schemas.ts";
import { compactJson, type JsonSchema } from "./schema.ts";

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

const json = (schema: JsonSchema) => ({ "application/json": { schema } });

const errorResponse = (description: string) => ({ description, content: json(ref("Error")) });

const commonErrors = {
  "400": errorResponse("Invalid request: the error's param names the field (with its path)."),
  "401": errorResponse("Missing or invalid API key."),
};

const projectHeader = {
  name: "Compat-Project",
  in: "header",
  required: false,
  description: "Team and project for usage tracking, as <team>/<project>.",
  schema: { type: "string", pattern: "^[^/]+/[^/]+$" },
};

const generationErrors = {
  ...commonErrors,
  "404": errorResponse("Unknown model."),
  "408": errorResponse("The request ran past the server's request timeout."),
  "413": errorResponse("Request body too large."),
  "429": errorResponse(
    "The API key's concurrent-request or tokens-per-minute limit (Retry-After says when to retry).",
  ),
  "500": errorResponse("Engine failure."),
  "503": errorResponse(
    "The server is shutting down, too many requests are waiting, or usage cannot be recorded (Retry-After).",
  ),
};

export function buildOpenApiDocument(): object {
  return compactJson({
    openapi: "3.1.0",
    info: {
      title: "ortserve",
      version: "1",
      description:
        "OpenAI-compatible chat completions and completions (with vLLM's extra fields) served in-process on ONNX Runtime, and model checkpoint listing.",
    },
    security: [{ bearerAuth: [] }],
    paths: {
      "/v1/chat/completions": {
        post: {
          operationId: "createChatCompletion",
          summary: "Generate a model reply for a list of chat messages.",
          parameters: [projectHeader],
          requestBody: { required: true, content: json(ref("ChatCompletionRequest")) },
          responses: {
            "200": {
              description: "The reply (or, with stream=true, a stream of chunks).",
              content: {
                ...json(ref("ChatCompletionResponse")),
                "text/event-stream": { schema: ref("ChatCompletionChunk") },
              },
            },
            ...generationErrors,
          },
        },
      },
      "/v1/completions": {
        post: {
          operationId: "createCompletion",
          summary:
            "Continue one or more prompts (text or token ids); with echo and max_tokens 0, score them.",
          parameters: [projectHeader],
          requestBody: { required: true, content: json(ref("CompletionRequest")) },
          responses: {
            "200": {
              description: "The completions (or, with stream=true, a stream of chunks).",
              content: {
                ...json(ref("CompletionResponse")),
                "text/event-stream": { schema: ref("CompletionChunk") },
              },
            },
            ...generationErrors,
          },
        },
      },
      "/v1/models": {
        get: {
          operationId: "listModels",
          summary: "List the served models and their checkpoints.",
          responses: {
            "200": { description: "The models.", content: json(ref("ModelList")) },
            ...commonErrors,
          },
        },
      },
      "/v1/preview/models/{model_id}/checkpoints": {
        get: {
          operationId: "listModelCheckpoints",
          summary: "List a model's checkpoints, paginated by cursor.",
          parameters: [
            { name: "model_id", in: "path", required: true, schema: { type: "string" } },
            {
              name: "after",
              in: "query",
              required: false,
              description: "Cursor: ID of the last item of the previous page.",
              schema: { type: "string" },
            },
            {
              name: "limit",
              in: "query",
              required: false,
              description: "Number of items to return.",
              schema: { type: "integer", minimum: 1, maximum: 100, default: 20 },
            },
            {
              name: "order",
              in: "query",
              required: false,
              description: "Sort order by step.",
              schema: { type: "string", enum: ["asc", "desc"], default: "asc" },
            },
          ],
          responses: {
            "200": { description: "One page of checkpoints.", content: json(ref("CheckpointList")) },
            ...commonErrors,
            "404": errorResponse("Unknown model."),
          },
        },
        delete: {
          operationId: "deleteModelCheckpoints",
          summary:
            "Remove checkpoints by step: unlisted at once; their files are deleted once requests using them finish.",
          parameters: [{ name: "model_id", in: "path", required: true, schema: { type: "string" } }],
          requestBody: { required: true, content: json(ref("DeleteCheckpointsRequest")) },
          responses: {
            "200": { description: "What was removed.", content: json(ref("DeleteCheckpointsResponse")) },
            ...commonErrors,
            "404": errorResponse("Unknown model."),
          },
        },
      },
      "/health": {
        get: {
          operationId: "health",
          summary: "Liveness; 503 while draining for shutdown.",
          security: [],
          responses: {
            "200": { description: "Serving.", content: json(ref("Health")) },
            "503": { description: "Draining.", content: json(ref("Health")) },
          },
        },
      },
      "/openapi.json": {
        get: {
          operationId: "openapi",
          summary: "This document.",
          responses: {
            "200": { description: "The OpenAPI document.", content: json({ type: "object" }) },
            "401": commonErrors["401"],
          },
        },
      },
    },
    components: {
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", description: "Authorization: Bearer <API key>." },
      },
      schemas: {
        ChatCompletionRequest: chatCompletionRequestSchema.jsonSchema(),
        ChatCompletionResponse: chatCompletionResponseSchema,
        ChatCompletionChunk: chatCompletionChunkSchema,
        CompletionRequest: completionRequestSchema.jsonSchema(),
        CompletionResponse: completionResponseSchema,
        CompletionChunk: completionChunkSchema,
        ModelList: modelListSchema,
        CheckpointList: checkpointListSchema,
        DeleteCheckpointsRequest: deleteCheckpointsRequestSchema.jsonSchema(),
        DeleteCheckpointsResponse: deleteCheckpointsResponseSchema,
        Health: healthSchema,
        Error: errorSchema,
      },
    },
  });
}
