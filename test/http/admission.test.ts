/**
 * Admission control over real HTTP: the waiting-request limit (503 + Retry-After), per-key
 * concurrency and tokens-per-minute (429 + Retry-After with OpenAI's rate-limit body), per-request
 * token limits (400 naming the limit) and the request timeout (408, or an SSE error event). A
 * template that loops until its budget holds a request in the waiting state for a known time.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SERVER_DEFAULTS, type ServerConfig } from "../../src/server.ts";
import {
  addSyntheticModel,
  CONTEXT,
  chat,
  expectApiError,
  get,
  type Harness,
  type Reply,
  startHarness,
  tinyRequest,
} from "./harness.ts";

// CPU-bound without end, in little memory: it always meets the time budget first.
const LOOP = "{% for i in range(999999) %}{% for j in range(1000) %}{% endfor %}{% endfor %}";
/** A request that stays waiting (rendering its template) for the template budget, then fails. */
const held = () => tinyRequest({ chat_template: LOOP });

function harness(config: Partial<ServerConfig>): Promise<Harness> {
  return startHarness((models) => addSyntheticModel(models, "tiny").then(() => undefined), {
    trustRequestChatTemplate: true,
    templates: { workers: 2, timeoutMs: 1500, maxOutputChars: 100_000 },
    ...config,
  });
}

function metric(text: string, name: string, labels = ""): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

/** Resolves once /metrics shows `n` waiting requests. */
async function waitingIs(h: Harness, n: number): Promise<void> {
  for (;;) {
    const m = await get(h, "/metrics", {});
    if (metric(m.text, "ortserve_admission_waiting_requests") === n) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

function retryAfter(r: Reply): number {
  const value = Number(r.headers.get("retry-after"));
  expect(Number.isInteger(value) && value >= 1, `Retry-After: ${r.headers.get("retry-after")}`).toBe(true);
  return value;
}

describe("waiting-request limit", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness({ admission: { ...SERVER_DEFAULTS.admission, maxWaiting: 1 } });
  });
  afterAll(() => h?.dispose());

  it("beyond it a 503 with Retry-After; admitted work finishes and the server admits again", async () => {
    const first = chat(h, held());
    await waitingIs(h, 1);
    const refused = await chat(h, tinyRequest());
    expectApiError(refused, 503, { code: "server_overloaded", type: "service_unavailable_error" });
    retryAfter(refused);
    expect((await get(h, "/health", {})).status).toBe(200);
    expectApiError(await first, 400, { code: "template_timeout" });
    await waitingIs(h, 0);
    expect((await chat(h, tinyRequest())).status).toBe(200);
    const m = (await get(h, "/metrics", {})).text;
    expect(metric(m, "ortserve_admission_refusals_total", '{reason="waiting_full"}')).toBe(1);
  });
});

describe("per-key limits", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness({
      admission: { maxWaiting: 0, maxConcurrentPerKey: 1, tokensPerMinutePerKey: 40 },
    });
  });
  afterAll(() => h?.dispose());

  it("a key's second concurrent request gets a 429 (requests); other keys are not held back", async () => {
    const other = h.server.storage.keys.createKey("other").key;
    const first = chat(h, held());
    await waitingIs(h, 1);
    const refused = await chat(h, tinyRequest());
    const e = expectApiError(refused, 429, { type: "requests", code: "rate_limit_exceeded", param: null });
    expect(e.message).toMatch(/concurrent requests.*limit 1/);
    retryAfter(refused);
    const r = await chat(h, tinyRequest(), { Authorization: `Bearer ${other}` });
    expect(r.status, r.text).toBe(200);
    expectApiError(await first, 400, { code: "template_timeout" });
  });

  it("a key past its tokens per minute gets a 429 (tokens) saying when to retry", async () => {
    const fresh = h.server.storage.keys.createKey("tpm").key;
    const auth = { Authorization: `Bearer ${fresh}` };
    const used = await chat<{ usage: { total_tokens: number } }>(
      h,
      tinyRequest({ max_tokens: 40, ignore_eos: true }),
      auth,
    );
    expect(used.status, used.text).toBe(200);
    expect(used.json.usage.total_tokens).toBeGreaterThanOrEqual(40);
    const refused = await chat(h, tinyRequest(), auth);
    const e = expectApiError(refused, 429, { type: "tokens", code: "rate_limit_exceeded" });
    expect(e.message).toContain(`limit 40, used ${used.json.usage.total_tokens}`);
    expect(retryAfter(refused)).toBeLessThanOrEqual(60);
    const m = (await get(h, "/metrics", {})).text;
    expect(metric(m, "ortserve_admission_refusals_total", '{reason="key_tokens"}')).toBe(1);
    expect(metric(m, "ortserve_admission_refusals_total", '{reason="key_concurrency"}')).toBe(1);
  });
});

describe("per-request token limits", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness({
      requestLimits: { ...SERVER_DEFAULTS.requestLimits, maxPromptTokens: 40, maxTotalTokens: 60 },
    });
  });
  afterAll(() => h?.dispose());

  const long = "one two three four five six seven eight nine ten ".repeat(8);

  it("a prompt over the limit is a 400 naming the limit", async () => {
    const e = expectApiError(
      await chat(h, tinyRequest({ messages: [{ role: "user", content: long }] })),
      400,
      { param: "messages" },
    );
    expect(e.message).toContain("40 prompt tokens per request (max_prompt_tokens)");
  });

  it("prompt plus max_tokens over the total is a 400 naming the field and the limit", async () => {
    const e = expectApiError(await chat(h, tinyRequest({ max_tokens: 59 })), 400, { param: "max_tokens" });
    expect(e.message).toContain("60 prompt plus completion tokens per request (max_total_tokens)");
    const c = await chat(h, tinyRequest({ max_tokens: undefined, max_completion_tokens: 59 }));
    expectApiError(c, 400, { param: "max_completion_tokens" });
  });

  it("without max_tokens the completion fills what the total leaves", async () => {
    const r = await chat<{ usage: { total_tokens: number }; choices: { finish_reason: string }[] }>(
      h,
      tinyRequest({ max_tokens: undefined, ignore_eos: true }),
    );
    expect(r.status, r.text).toBe(200);
    expect(r.json.usage.total_tokens).toBe(60);
    expect(r.json.choices[0]!.finish_reason).toBe("length");
  });
});

describe("request timeout", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness({ requestLimits: { ...SERVER_DEFAULTS.requestLimits, requestTimeoutMs: 5 } });
  });
  afterAll(() => h?.dispose());

  const long = () => tinyRequest({ max_tokens: CONTEXT - 20, ignore_eos: true });

  it("a generation past its deadline ends with a 408, or an error event once streaming", async () => {
    expectApiError(await chat(h, long()), 408, { code: "request_timeout", message: /0.005 s/ });
    const s = await chat(h, { ...long(), stream: true });
    if (s.status === 200) {
      expect(s.text).toMatch(/data: \{"error":\{[^\n]*"code":"request_timeout"\}\}\n\ndata: \[DONE\]\n\n$/);
    } else expectApiError(s, 408, { code: "request_timeout" });
    await waitingIs(h, 0);
    const m = (await get(h, "/metrics", {})).text;
    expect(metric(m, "ortserve_request_timeouts_total")).toBe(2);
    expect((await get(h, "/health", {})).status).toBe(200);
  });
});
