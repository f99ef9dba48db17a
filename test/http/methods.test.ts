/**
 * Methods over raw HTTP (node:http: fetch refuses TRACE): a method a known path does not answer is
 * a 405 with Allow and an OpenAI error body, TRACE and QUERY included; an unknown path stays a 404.
 */
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await startHarness(() => undefined);
});
afterAll(() => h?.dispose());

function send(
  method: string,
  path: string,
  extra: Record<string, string> = {},
): Promise<{ status: number; allow?: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${h.url}${path}`,
      { method, headers: { Authorization: `Bearer ${h.key}`, ...extra } },
      (res) => {
        let body = "";
        res.on("data", (d: Buffer) => {
          body += d.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, allow: res.headers.allow, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("methods a path does not answer", () => {
  it.each([
    ["TRACE", "/v1/chat/completions", "POST"],
    ["QUERY", "/v1/completions", "POST"],
    ["GET", "/v1/chat/completions", "POST"],
    ["PUT", "/v1/models", "GET, HEAD"],
    ["POST", "/v1/preview/models/m/checkpoints", "GET, HEAD, DELETE"],
    ["DELETE", "/openapi.json", "GET, HEAD"],
    ["PATCH", "/health", "GET, HEAD"],
  ])("%s %s is a 405 with Allow: %s", async (method, path, allow) => {
    const r = await send(method, path);
    expect(r.status).toBe(405);
    expect(r.allow).toBe(allow);
    expect(JSON.parse(r.body).error).toMatchObject({
      type: "invalid_request_error",
      code: "method_not_allowed",
    });
  });

  it("is a 405 whatever the request's headers say (a malformed project header, no key)", async () => {
    expect((await send("TRACE", "/v1/chat/completions", { "Compat-Project": "0" })).status).toBe(405);
    const noKey = await new Promise<number>((resolve, reject) =>
      request(`${h.url}/v1/completions`, { method: "PUT" }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on("error", reject)
        .end(),
    );
    expect(noKey).toBe(405);
  });

  it("an unknown path is still a 404", async () => {
    const r = await send("TRACE", "/v1/nothing-here");
    expect(r.status).toBe(404);
  });
});
