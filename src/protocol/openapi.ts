/**
 * The OpenAPI 3.1 document of the service. The chat completion request schema is generated from
 * the same schema objects that validate requests, so the two cannot drift.
 */

import { MAX_PROJECT_ID } from "../storage/usage.ts";
import { countTokensRequestSchema, messagesRequestSchema } from "./anthropic/messages-request.ts";
import {
  anthropicErrorSchema,
  anthropicMessageSchema,
  countTokensResponseSchema,
  messagesStreamEventSchema,
} from "./anthropic/schemas.ts";
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
import { responsesRequestSchema } from "./responses/request.ts";
import {
  deletedResponseSchema,
  inputItemListSchema,
  responseObjectSchema,
  responsesStreamEventSchema,
} from "./responses/schemas.ts";
import { compactJson, type JsonSchema } from "./schema.ts";
import {
  detokenizeRequestSchema,
  detokenizeResponseSchema,
  tokenizeRequestSchema,
  tokenizeResponseSchema,
} from "./tokenize.ts";

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

const json = (schema: JsonSchema) => ({ "application/json": { schema } });

const errorResponse = (description: string) => ({ description, content: json(ref("Error")) });

/**
 * One server-sent event of a stream (OpenAPI 3.1: `schema` describes each event): its data is a
 * chunk, the error that ended the stream after it started, or the closing [DONE].
 */
const streamEvent = (chunk: string) => ({
  type: "object",
  required: ["data"],
  properties: {
    event: { type: "string" },
    data: {
      anyOf: [
        { const: "[DONE]" },
        {
          type: "string",
          contentMediaType: "application/json",
          contentSchema: { anyOf: [ref(chunk), ref("Error")] },
        },
      ],
    },
  },
});

const commonErrors = {
  "400": errorResponse("Invalid request: the error's param names the field (with its path)."),
  "401": errorResponse("Missing or invalid API key."),
};

/** One part of `<team>/<project>`: 1 to 64 of letters, digits, ".", "_", "-", and not "." or "..". */
const PROJECT_PART =
  "(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\\.\\.[A-Za-z0-9._-]{1,62})";

const projectHeaders = [
  {
    name: "Compat-Project",
    in: "header",
    required: false,
    description:
      'Team and project for usage tracking, as <team>/<project>: each part 1 to 64 of letters, digits, ".", "_", "-", and not "." or "..". Wins over OpenAI-Project.',
    schema: { type: "string", pattern: `^${PROJECT_PART}/${PROJECT_PART}$` },
  },
  {
    name: "OpenAI-Project",
    in: "header",
    required: false,
    description: `What the official SDKs send for their project option: a project id alone (such as proj_abc123; 1 to ${MAX_PROJECT_ID} printable ASCII characters, no leading or trailing space), recorded with no team, or <team>/<project> as Compat-Project takes it.`,
    schema: {
      type: "string",
      pattern: `^[\\x21-\\x7e](?:[\\x20-\\x7e]{0,${MAX_PROJECT_ID - 2}}[\\x21-\\x7e])?$`,
    },
  },
];

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

const anthropicError = (description: string) => ({ description, content: json(ref("AnthropicError")) });

/** The Messages routes answer in Anthropic's error shape, with the same statuses. */
const anthropicErrors = Object.fromEntries(
  Object.entries(generationErrors).map(([status, r]) => [status, anthropicError(r.description)]),
);

/** A Messages stream: named events whose data is the event (or the error that ended it); no [DONE]. */
const anthropicStreamEvent = {
  type: "object",
  required: ["event", "data"],
  properties: {
    event: { type: "string" },
    data: {
      type: "string",
      contentMediaType: "application/json",
      contentSchema: { anyOf: [ref("MessagesStreamEvent"), ref("AnthropicError")] },
    },
  },
};

/** A Responses stream: named events whose data is the event (an error event ends it early); no [DONE]. */
const responsesStreamEvent = {
  type: "object",
  required: ["event", "data"],
  properties: {
    event: { type: "string" },
    data: {
      type: "string",
      contentMediaType: "application/json",
      contentSchema: ref("ResponsesStreamEvent"),
    },
  },
};

const responseIdParameter = {
  name: "response_id",
  in: "path",
  required: true,
  description: "A stored response's id (resp_…).",
  schema: { type: "string" },
};

/** Bearer, or on the Messages routes Anthropic's x-api-key header. */
const anthropicSecurity = [{ bearerAuth: [] }, { apiKeyHeader: [] }];

const anthropicVersion = {
  name: "anthropic-version",
  in: "header",
  required: false,
  description: "Accepted (any version): the routes answer as the Messages API documents.",
  schema: { type: "string" },
};

export function buildOpenApiDocument(): object {
  return compactJson({
    openapi: "3.1.0",
    info: {
      title: "ortserve",
      version: "1",
      description:
        "OpenAI-compatible chat completions and completions (with vLLM's extra fields), the OpenAI Responses API, the Anthropic Messages API, and vLLM's tokenize and detokenize, served in-process on ONNX Runtime, and model checkpoint listing.",
    },
    security: [{ bearerAuth: [] }],
    paths: {
      "/v1/chat/completions": {
        post: {
          operationId: "createChatCompletion",
          summary: "Generate a model reply for a list of chat messages.",
          parameters: projectHeaders,
          requestBody: { required: true, content: json(ref("ChatCompletionRequest")) },
          responses: {
            "200": {
              description: "The reply (or, with stream=true, a stream of chunks).",
              content: {
                ...json(ref("ChatCompletionResponse")),
                "text/event-stream": { schema: streamEvent("ChatCompletionChunk") },
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
          parameters: projectHeaders,
          requestBody: { required: true, content: json(ref("CompletionRequest")) },
          responses: {
            "200": {
              description: "The completions (or, with stream=true, a stream of chunks).",
              content: {
                ...json(ref("CompletionResponse")),
                "text/event-stream": { schema: streamEvent("CompletionChunk") },
              },
            },
            ...generationErrors,
          },
        },
      },
      "/v1/responses": {
        post: {
          operationId: "createResponse",
          summary: "OpenAI Responses API: generate a response to input items (stored unless store is false).",
          parameters: projectHeaders,
          requestBody: { required: true, content: json(ref("ResponsesRequest")) },
          responses: {
            "200": {
              description: "The response (or, with stream=true, a stream of Responses events).",
              content: {
                ...json(ref("Response")),
                "text/event-stream": { schema: responsesStreamEvent },
              },
              // A stored response (store defaults to true) is retrieved and deleted by its id.
              links: {
                GetResponse: {
                  operationId: "getResponse",
                  parameters: { response_id: "$response.body#/id" },
                },
                DeleteResponse: {
                  operationId: "deleteResponse",
                  parameters: { response_id: "$response.body#/id" },
                },
              },
            },
            ...generationErrors,
            "400": errorResponse(
              "Invalid request: the error's param names the field (with its path); previous_response_id naming no stored response of this key (code previous_response_not_found).",
            ),
          },
        },
      },
      "/v1/responses/{response_id}": {
        get: {
          operationId: "getResponse",
          summary: "A stored response, for the API key that created it.",
          parameters: [responseIdParameter],
          responses: {
            "200": { description: "The response.", content: json(ref("Response")) },
            ...commonErrors,
            "404": errorResponse(
              "No stored response of this key with that id (never stored, expired or deleted).",
            ),
          },
        },
        delete: {
          operationId: "deleteResponse",
          summary: "Delete a stored response of the API key that created it.",
          parameters: [responseIdParameter],
          responses: {
            "200": { description: "Deleted.", content: json(ref("DeletedResponse")) },
            ...commonErrors,
            "404": errorResponse(
              "No stored response of this key with that id (never stored, expired or deleted).",
            ),
          },
        },
      },
      "/v1/responses/{response_id}/input_items": {
        get: {
          operationId: "listResponseInputItems",
          summary:
            "The conversation a stored response answered (a previous response's input and output included), one page of items.",
          parameters: [
            responseIdParameter,
            {
              name: "after",
              in: "query",
              description: "An item id: the page starts after it (in the order asked).",
              schema: { type: "string" },
            },
            {
              name: "limit",
              in: "query",
              description: "Items per page, 1 to 100 (default 20).",
              schema: { type: "integer", minimum: 1, maximum: 100, default: 20 },
            },
            {
              name: "order",
              in: "query",
              description: "desc (the default): newest first; asc: oldest first.",
              schema: { type: "string", enum: ["asc", "desc"], default: "desc" },
            },
          ],
          responses: {
            "200": { description: "A page of items.", content: json(ref("InputItemList")) },
            ...commonErrors,
            "404": errorResponse(
              "No stored response of this key with that id (never stored, expired or deleted).",
            ),
          },
        },
      },
      "/v1/messages": {
        post: {
          operationId: "createMessage",
          summary: "Anthropic Messages API: generate the assistant's next turn.",
          security: anthropicSecurity,
          parameters: [...projectHeaders, anthropicVersion],
          requestBody: { required: true, content: json(ref("MessagesRequest")) },
          responses: {
            "200": {
              description: "The message (or, with stream=true, a stream of Messages events).",
              content: {
                ...json(ref("AnthropicMessage")),
                "text/event-stream": { schema: anthropicStreamEvent },
              },
            },
            ...anthropicErrors,
          },
        },
      },
      "/v1/messages/count_tokens": {
        post: {
          operationId: "countMessageTokens",
          summary: "Anthropic Messages API: the prompt tokens a request would use, nothing generated.",
          security: anthropicSecurity,
          parameters: [anthropicVersion],
          requestBody: { required: true, content: json(ref("CountTokensRequest")) },
          responses: {
            "200": { description: "The count.", content: json(ref("CountTokensResponse")) },
            "400": anthropicError("Invalid request."),
            "401": anthropicError("Missing or invalid API key."),
            "404": anthropicError("Unknown model."),
            "413": anthropicError("Request body too large."),
            "503": anthropicError("The server is shutting down."),
          },
        },
      },
      "/tokenize": {
        post: {
          operationId: "tokenize",
          summary: "vLLM's tokenize: a prompt, or chat messages through the model's template, as token ids.",
          requestBody: { required: true, content: json(ref("TokenizeRequest")) },
          responses: {
            "200": { description: "The token ids.", content: json(ref("TokenizeResponse")) },
            ...commonErrors,
            "404": errorResponse("Unknown model."),
            "413": errorResponse("Request body too large."),
            "503": errorResponse("The server is shutting down."),
          },
        },
      },
      "/detokenize": {
        post: {
          operationId: "detokenize",
          summary: "vLLM's detokenize: token ids as text (special tokens included).",
          requestBody: { required: true, content: json(ref("DetokenizeRequest")) },
          responses: {
            "200": { description: "The text.", content: json(ref("DetokenizeResponse")) },
            ...commonErrors,
            "404": errorResponse("Unknown model."),
            "413": errorResponse("Request body too large."),
            "503": errorResponse("The server is shutting down."),
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
              description:
                "Cursor: ID of the last item of the previous page (a 404 when the model has no such checkpoint).",
              schema: { type: "string", minLength: 1 },
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
            "404": errorResponse("Unknown model, or an after cursor naming none of its checkpoints."),
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
        apiKeyHeader: {
          type: "apiKey",
          in: "header",
          name: "x-api-key",
          description: "x-api-key: <API key> (the Messages routes only).",
        },
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
        ResponsesRequest: responsesRequestSchema.jsonSchema(),
        Response: responseObjectSchema,
        ResponsesStreamEvent: responsesStreamEventSchema,
        DeletedResponse: deletedResponseSchema,
        InputItemList: inputItemListSchema,
        MessagesRequest: messagesRequestSchema.jsonSchema(),
        AnthropicMessage: anthropicMessageSchema,
        MessagesStreamEvent: messagesStreamEventSchema,
        AnthropicError: anthropicErrorSchema,
        CountTokensRequest: countTokensRequestSchema.jsonSchema(),
        CountTokensResponse: countTokensResponseSchema,
        TokenizeRequest: tokenizeRequestSchema.jsonSchema(),
        TokenizeResponse: tokenizeResponseSchema,
        DetokenizeRequest: detokenizeRequestSchema.jsonSchema(),
        DetokenizeResponse: detokenizeResponseSchema,
        Health: healthSchema,
        Error: errorSchema,
      },
    },
  });
}
