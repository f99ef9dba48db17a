/**
 * Over raw HTTP: API keys on every /v1 route (and none on /health and /metrics), and the error
 * responses every client sees before a request reaches the engine — unknown routes and models, body
 * size, content type, malformed JSON, non-object bodies and unknown fields.
 */
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addSyntheticModel,
  chat,
  expectApiError,
  get,
  type Harness,
  reply,
  startHarness,
  tinyRequest,
} from "./harness.ts";

/** Small enough that an over-limit body is cheap to send. */
const MAX_BODY = 16 * 1024;

let h: Harness;

beforeAll(async () => {
  h = await startHarness((models) => addSyntheticModel(models, "tiny").then(() => undefined), {
    maxBodyBytes: MAX_BODY,
  });
});

afterAll(async () => {
  await h?.dispose();
});

interface Route {
  name: string;
  call(headers: Record<string, string>): Promise<Response>;
}

const routes: Route[] = [
  {
    name: "GET /v1/models",
    call: (headers) => fetch(`${h.url}/v1/models`, { headers }),
  },
  {
    name: "POST /v1/chat/completions",
    call: (headers) =>
      fetch(`${h.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        body: JSON.stringify(tinyRequest()),
      }),
  },
  {
    name: "GET /v1/preview/models/{id}/checkpoints",
    call: (headers) => fetch(`${h.url}/v1/preview/models/tiny/checkpoints`, { headers }),
  },
];

/** Authorization headers that must all be refused (the key is filled in per test). */
const refused: { name: string; headers: (key: string) => Record<string, string> }[] = [
  { name: "no Authorization header", headers: () => ({}) },
  { name: "a wrong key", headers: () => ({ Authorization: "Bearer osk-not-a-real-key" }) },
  { name: "the key with one character changed", headers: (k) => ({ Authorization: `Bearer ${k}x` }) },
  { name: "the key without a scheme", headers: (k) => ({ Authorization: k }) },
  { name: "a Basic scheme", headers: (k) => ({ Authorization: `Basic ${k}` }) },
  { name: "Bearer without a token", headers: () => ({ Authorization: "Bearer" }) },
  { name: "Bearer and blanks only", headers: () => ({ Authorization: "Bearer    " }) },
  { name: "two tokens", headers: (k) => ({ Authorization: `Bearer ${k} ${k}` }) },
  { name: "an empty header", headers: () => ({ Authorization: "" }) },
];

describe("authentication on every /v1 route", () => {
  for (const route of routes) {
    describe(route.name, () => {
      for (const bad of refused)
        it(`401 with an OpenAI error body for ${bad.name}`, async () => {
          const r = await reply(await route.call(bad.headers(h.key)));
          expectApiError(r, 401, { type: "authentication_error", code: "invalid_api_key", param: null });
        });

      for (const scheme of ["Bearer", "bearer", "BEARER", "bEaReR"])
        it(`accepts the key with the scheme spelled "${scheme}"`, async () => {
          const r = await reply(await route.call({ Authorization: `${scheme} ${h.key}` }));
          expect(r.status, r.text).toBe(200);
        });
    });
  }

  it("checks the key before anything else: an invalid body without a key is a 401", async () => {
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "text/plain" },
      body: "not json",
    });
    expectApiError(await reply(res), 401, { code: "invalid_api_key" });
  });

  it("an unknown /v1 route needs a key too (401 without, 404 with)", async () => {
    expectApiError(await get(h, "/v1/nothing-here", {}), 401);
    expectApiError(await get(h, "/v1/nothing-here"), 404, { type: "not_found_error" });
  });

  it("/health and /metrics need no key (auth.test.ts covers the rest)", async () => {
    for (const path of ["/health", "/metrics"]) {
      const r = await get(h, path, {});
      expect(r.status, path).toBe(200);
    }
    expect((await get(h, "/health", {})).json).toEqual({ status: "ok" });
  });

  it("a revoked key is refused on the next request; other keys keep working", async () => {
    const created = h.server.storage.keys.createKey("short-lived");
    const headers = { Authorization: `Bearer ${created.key}` };
    expect((await get(h, "/v1/models", headers)).status).toBe(200);
    expect((await chat(h, tinyRequest(), headers)).status).toBe(200);

    expect(h.server.storage.keys.revokeKey(String(created.id))?.revokedAt).not.toBeNull();
    expectApiError(await get(h, "/v1/models", headers), 401, { code: "invalid_api_key" });
    expectApiError(await chat(h, tinyRequest(), headers), 401, { code: "invalid_api_key" });
    expectApiError(await get(h, "/v1/preview/models/tiny/checkpoints", headers), 401);
    expect((await get(h, "/v1/models")).status).toBe(200);
  });
});

describe("errors before the engine", () => {
  it("an unknown route is a 404 with an OpenAI error body", async () => {
    for (const path of ["/nope", "/v2/chat/completions", "/v1/chat/completions/extra"]) {
      const e = expectApiError(await get(h, path), 404, { type: "not_found_error", param: null });
      expect(e.message).toContain(path);
    }
    // A known path with a method it does not answer: 405 (test/http/methods.test.ts).
    const wrongMethod = await reply(await fetch(`${h.url}/v1/chat/completions`, { headers: bearer() }));
    expectApiError(wrongMethod, 405, { code: "method_not_allowed" });
    expect(wrongMethod.headers.get("allow")).toBe("POST");
  });

  it("an unknown model is a 404 naming the model parameter", async () => {
    for (const model of ["no-such-model", "tiny:step1", "tiny:step01", "TINY"]) {
      const e = expectApiError(await chat(h, tinyRequest({ model })), 404, {
        param: "model",
        type: "not_found_error",
        code: "model_not_found",
      });
      expect(e.message).toContain(model);
    }
  });

  it("a body over the size limit is a 413; one at the limit is served", async () => {
    const base = JSON.stringify(tinyRequest({ user: "" }));
    const atLimit = JSON.stringify(tinyRequest({ user: "u".repeat(MAX_BODY - base.length) }));
    expect(Buffer.byteLength(atLimit)).toBe(MAX_BODY);
    expect((await chat(h, atLimit)).status).toBe(200);

    const over = JSON.stringify(tinyRequest({ user: "u".repeat(MAX_BODY - base.length + 1) }));
    expectApiError(await chat(h, over), 413, { code: "payload_too_large", param: null });
  });

  it("a chunked body (no Content-Length) over the limit is a 413 too", async () => {
    const piece = new TextEncoder().encode(`{"user": "${"u".repeat(MAX_BODY)}"}`);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(piece);
        controller.close();
      },
    });
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...bearer() },
      body,
      duplex: "half",
    } as RequestInit);
    expectApiError(await reply(res), 413, { code: "payload_too_large" });
  });

  it("a Content-Type other than application/json is a 400", async () => {
    const body = JSON.stringify(tinyRequest());
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "application/jsonx",
      "application/json-patch+json",
      "text/json",
    ]) {
      const r = await chat(h, body, { "Content-Type": type });
      expect(r.status, type).toBe(400);
      const e = expectApiError(r, 400, {
        type: "invalid_request_error",
        code: "invalid_content_type",
      });
      expect(e.message, type).toMatch(/application\/json/);
    }
    const none = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: bearer(),
      body: new Blob([body]),
    });
    expectApiError(await reply(none), 400, { code: "invalid_content_type" });
  });

  it("application/json with parameters or in another case is accepted", async () => {
    for (const type of [
      "application/json; charset=utf-8",
      "Application/JSON",
      "application/json;charset=UTF-8",
    ]) {
      const r = await chat(h, tinyRequest(), { "Content-Type": type });
      expect(r.status, `${type}: ${r.text}`).toBe(200);
    }
  });

  // Known bug: body-parser's own client errors (415 unsupported charset or encoding, 400 corrupt
  // compressed body) reach the error handler as unknown errors and come back as 500s.
  for (const [name, headers] of [
    ["an unsupported charset", { "Content-Type": "application/json; charset=klingon" }],
    ["an unsupported Content-Encoding", { "Content-Encoding": "zstd-but-not-really" }],
    ["a gzip Content-Encoding over a body that is not gzip", { "Content-Encoding": "gzip" }],
  ] as const)
    it(`${name} is a client error (4xx with an OpenAI body), not a 500`, async () => {
      const r = await chat(h, JSON.stringify(tinyRequest()), headers);
      expect(r.status, r.text).toBeGreaterThanOrEqual(400);
      expect(r.status, r.text).toBeLessThan(500);
      expectApiError(r, r.status, { type: "invalid_request_error" });
    });

  it("a gzip-compressed JSON body is accepted", async () => {
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Content-Encoding": "gzip", ...bearer() },
      body: gzipSync(JSON.stringify(tinyRequest())),
    });
    expect(res.status).toBe(200);
  });

  it("invalid JSON is a 400", async () => {
    for (const text of ["{", "", "{'model': 'tiny'}", '{"model": "tiny",}', "nul", "{} {}"]) {
      const e = expectApiError(await chat(h, text), 400, {
        type: "invalid_request_error",
        code: "invalid_json",
        param: null,
      });
      expect(e.message, text).toMatch(/JSON/);
    }
  });

  it("a JSON body that is not an object is a 400", async () => {
    for (const text of ["[]", "[{}]", '"hello"', "5", "null", "true"])
      expectApiError(await chat(h, text), 400, { type: "invalid_request_error", param: null });
  });

  it("an unknown top-level field is a 400 naming it", async () => {
    for (const field of ["temprature", "functions", "max_new_tokens", "__proto__", "constructor"]) {
      const text = JSON.stringify(tinyRequest()).replace(/}$/, `, ${JSON.stringify(field)}: 1}`);
      const e = expectApiError(await chat(h, text), 400, {
        param: field,
        type: "invalid_request_error",
        code: "unknown_parameter",
      });
      expect(e.message).toContain(field);
    }
  });

  it("an unknown field inside an object is named with its path", async () => {
    const r = await chat(h, tinyRequest({ messages: [{ role: "user", content: "hi", colour: "red" }] }));
    expectApiError(r, 400, { param: "messages[0].colour", code: "unknown_parameter" });
  });
});

function bearer(): Record<string, string> {
  return { Authorization: `Bearer ${h.key}` };
}
