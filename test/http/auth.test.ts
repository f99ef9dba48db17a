/**
 * API keys on every route but /health (and /metrics unless the operator protects it): missing,
 * malformed, revoked and wrong keys are refused with a 401, and no key, good or bad, ever shows up
 * in a log line or a response body.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/observability/logger.ts";
import { generateKey } from "../../src/storage/api-keys.ts";
import { addSyntheticModel, type Harness, type Reply, reply, startHarness, tinyRequest } from "./harness.ts";

interface Route {
  name: string;
  path: string;
  method?: "POST";
  /** The status a valid key gets. */
  ok: number;
}

const protectedRoutes: Route[] = [
  { name: "chat completions", path: "/v1/chat/completions", method: "POST", ok: 200 },
  { name: "models", path: "/v1/models", ok: 200 },
  { name: "checkpoints", path: "/v1/preview/models/tiny/checkpoints", ok: 200 },
  { name: "the OpenAPI document", path: "/openapi.json", ok: 200 },
  { name: "an unknown /v1 path", path: "/v1/nothing", ok: 404 },
  { name: "an unknown path", path: "/nothing", ok: 404 },
];

function call(h: Harness, route: Route, headers: Record<string, string>): Promise<Reply> {
  const init: RequestInit = { headers };
  if (route.method === "POST") {
    init.method = "POST";
    init.headers = { ...headers, "Content-Type": "application/json" };
    init.body = JSON.stringify(tinyRequest());
  }
  return fetch(`${h.url}${route.path}`, init).then(reply);
}

const logLines: string[] = [];
let h: Harness;
let revoked: string;
/** A well-formed key that was never issued. */
const unknown = generateKey();

beforeAll(async () => {
  h = await startHarness((models) => addSyntheticModel(models, "tiny").then(() => undefined), {
    logger: createLogger("debug", {}, (line) => logLines.push(line)),
  });
  const created = h.server.storage.keys.createKey("revoked");
  revoked = created.key;
  h.server.storage.keys.revokeKey(String(created.id));
});
afterAll(() => h?.dispose());

/** Every way of presenting a key that must be refused, and the key text each one carries. */
function refusedCredentials(): { name: string; headers: Record<string, string>; secret?: string }[] {
  const valid = h.key;
  return [
    { name: "missing", headers: {} },
    { name: "empty", headers: { Authorization: "" } },
    { name: "no scheme", headers: { Authorization: valid }, secret: valid },
    { name: "Basic scheme", headers: { Authorization: `Basic ${valid}` }, secret: valid },
    { name: "token and junk", headers: { Authorization: `Bearer ${valid} x` }, secret: valid },
    { name: "Bearer only", headers: { Authorization: "Bearer " } },
    { name: "latin-1 token", headers: { Authorization: "Bearer ünïcödé" } },
    { name: "revoked", headers: { Authorization: `Bearer ${revoked}` }, secret: revoked },
    { name: "wrong", headers: { Authorization: `Bearer ${unknown}` }, secret: unknown },
    {
      name: "wrong suffix",
      headers: { Authorization: `Bearer ${valid.slice(0, -4)}AAAA` },
      secret: `${valid.slice(0, -4)}AAAA`,
    },
    {
      name: "wrong prefix",
      headers: { Authorization: `Bearer xsk-${valid.slice(4)}` },
      secret: `xsk-${valid.slice(4)}`,
    },
    { name: "key in another header", headers: { "X-Api-Key": valid }, secret: valid },
  ];
}

describe("authentication", () => {
  for (const route of protectedRoutes)
    it(`${route.name}: every refused credential is a 401 that does not echo it; the key works`, async () => {
      for (const c of refusedCredentials()) {
        const r = await call(h, route, c.headers);
        expect(r.status, `${c.name}: ${r.text}`).toBe(401);
        expect((r.json as { error: { code: string } }).error.code).toBe("invalid_api_key");
        if (c.secret) expect(r.text).not.toContain(c.secret.slice(4));
      }
      const r = await call(h, route, { Authorization: `Bearer ${h.key}` });
      expect(r.status, r.text).toBe(route.ok);
    });

  it("/health needs no key, and neither does /metrics by default", async () => {
    expect((await fetch(`${h.url}/health`)).status).toBe(200);
    expect((await fetch(`${h.url}/metrics`)).status).toBe(200);
  });

  it("no key appears in any log line", async () => {
    // Requests that succeed, fail in validation and fail in the engine, with the valid key too.
    const auth = { Authorization: `Bearer ${h.key}`, "Content-Type": "application/json" };
    for (const body of [tinyRequest(), tinyRequest({ n: 99 }), tinyRequest({ model: "nope" }), "{"])
      await fetch(`${h.url}/v1/chat/completions`, {
        method: "POST",
        headers: auth,
        body: typeof body === "string" ? body : JSON.stringify(body),
      });
    expect(logLines.length).toBeGreaterThan(20);
    const secrets = [h.key, revoked, unknown].map((k) => k.slice(4));
    for (const line of logLines) for (const s of secrets) expect(line).not.toContain(s);
  });
});

describe("with --metrics-require-key", () => {
  let p: Harness;
  beforeAll(async () => {
    p = await startHarness(() => undefined, { metricsRequireKey: true });
  });
  afterAll(() => p?.dispose());

  it("/metrics refuses missing and wrong keys; /health stays open", async () => {
    expect((await fetch(`${p.url}/metrics`)).status).toBe(401);
    expect(
      (await fetch(`${p.url}/metrics`, { headers: { Authorization: `Bearer ${unknown}` } })).status,
    ).toBe(401);
    const ok = await fetch(`${p.url}/metrics`, { headers: { Authorization: `Bearer ${p.key}` } });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain("ortserve_requests_total");
    expect((await fetch(`${p.url}/health`)).status).toBe(200);
  });
});
