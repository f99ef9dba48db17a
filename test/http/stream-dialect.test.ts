/**
 * The stream framings over a real Express response: OpenAI's data lines ending in [DONE];
 * Anthropic's named events, where a failure after the stream began (sent as the catalogue's error
 * body by the service) becomes an `error` event in Anthropic's body, with no end marker; and the
 * Responses API's named events, whose late error (a usage row that cannot be written) is an
 * `error` event numbered after the last event sent.
 */
import type { AddressInfo } from "node:net";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rateLimited, unavailable } from "../../src/errors.ts";
import { SseWriter } from "../../src/http/sse.ts";
import {
  anthropicDialect,
  openaiDialect,
  responsesDialect,
  type StreamDialect,
} from "../../src/http/stream-dialect.ts";

let url: string;
let close: () => void;

beforeAll(async () => {
  const app = express();
  const route = (dialect: StreamDialect) => (_req: express.Request, res: express.Response) => {
    const sse = new SseWriter(res);
    dialect.send(sse, { type: "message_start", n: 1 });
    dialect.send(sse, unavailable("The server is shutting down.").toBody());
    dialect.done(sse);
  };
  app.get("/openai", route(openaiDialect));
  app.get("/anthropic", route(anthropicDialect));
  app.get("/responses", (_req, res) => {
    const sse = new SseWriter(res);
    responsesDialect.send(sse, { type: "response.created", sequence_number: 0 });
    responsesDialect.send(sse, { type: "response.in_progress", sequence_number: 1 });
    responsesDialect.error(sse, unavailable("Usage cannot be recorded."));
    responsesDialect.done(sse);
  });
  const server = app.listen(0);
  await new Promise((r) => server.once("listening", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => server.close();
});
afterAll(() => close?.());

describe("stream dialects", () => {
  it("OpenAI: data lines, the error body as it is, then [DONE]", async () => {
    const text = await (await fetch(`${url}/openai`)).text();
    expect(text).toBe(
      `data: {"type":"message_start","n":1}\n\n` +
        `data: ${JSON.stringify(unavailable("The server is shutting down.").toBody())}\n\n` +
        "data: [DONE]\n\n",
    );
  });

  it("Anthropic: named events, the error as an error event in Anthropic's body, no end marker", async () => {
    const res = await fetch(`${url}/anthropic`);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(await res.text()).toBe(
      `event: message_start\ndata: {"type":"message_start","n":1}\n\n` +
        `event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"The server is shutting down."}}\n\n`,
    );
  });

  it("Responses: named events, a late error as an error event numbered next, no end marker", async () => {
    const res = await fetch(`${url}/responses`);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(await res.text()).toBe(
      `event: response.created\ndata: {"type":"response.created","sequence_number":0}\n\n` +
        `event: response.in_progress\ndata: {"type":"response.in_progress","sequence_number":1}\n\n` +
        `event: error\ndata: {"type":"error","code":"unavailable","message":"Usage cannot be recorded.","param":null,"sequence_number":2}\n\n`,
    );
    expect(responsesDialect.errorBody(unavailable("x"))).toEqual(unavailable("x").toBody());
  });

  it("Anthropic error bodies of refused requests follow the status", () => {
    expect(anthropicDialect.errorBody(rateLimited("tokens", "slow down", 1))).toEqual({
      type: "error",
      error: { type: "rate_limit_error", message: "slow down" },
    });
  });
});
