/**
 * Chat templates cannot take the server down: templates sent in requests are refused unless the
 * operator trusts them, and when trusted, a template that never ends fails alone with a 400 while
 * /health and other chats keep answering. Every render, the model's own template included, runs
 * in the template pool's threads (counted in /metrics).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addSyntheticModel,
  chat,
  expectApiError,
  get,
  type Harness,
  startHarness,
  tinyRequest,
} from "./harness.ts";

// The template: two nested range(999999) loops. It meets the time budget or the thread's
// heap cap first, depending on how much loop state the interpreter keeps.
const LOOP = "{% for i in range(999999) %}{% for j in range(999999) %}{{ '' }}{% endfor %}{% endfor %}";
const OVERRUN = /^template_(timeout|memory_exceeded)$/;

function rendersMetric(text: string, outcome: string): number {
  const m = new RegExp(`^ortserve_template_renders_total\\{outcome="${outcome}"\\} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

describe("with request templates trusted", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness((models) => addSyntheticModel(models, "tiny").then(() => undefined), {
      trustRequestChatTemplate: true,
      templates: { workers: 2, timeoutMs: 1500, maxOutputChars: 100_000 },
    });
  });
  afterAll(() => h?.dispose());

  it("a looping template gets a 400 naming the budget while /health and other chats answer", async () => {
    const order: string[] = [];
    const looping = chat(h, tinyRequest({ chat_template: LOOP })).then((r) => {
      order.push("loop");
      return r;
    });
    // Let the loop take its thread before the others arrive.
    await new Promise((r) => setTimeout(r, 200));
    const health = await get(h, "/health", {});
    order.push("health");
    expect(health.status).toBe(200);
    const normal = await chat(h, tinyRequest());
    order.push("chat");
    expect(normal.status, normal.text).toBe(200);
    const r = await looping;
    expect(order).toEqual(["health", "chat", "loop"]);
    const e = expectApiError(r, 400, { param: "chat_template" });
    expect(e.code).toMatch(OVERRUN);
    expect(e.message).toMatch(/1500 ms|memory/);
    // The overrun thread was replaced: the next template request renders.
    const after = await chat(h, tinyRequest({ chat_template: "{{ messages[0].content }}" }));
    expect(after.status, after.text).toBe(200);
    const metrics = await get(h, "/metrics", {});
    expect(rendersMetric(metrics.text, "timed_out") + rendersMetric(metrics.text, "out_of_memory")).toBe(1);
    expect(rendersMetric(metrics.text, "rendered")).toBeGreaterThanOrEqual(2);
  });

  it("a template that raises or outgrows the output budget is a 400", async () => {
    expectApiError(await chat(h, tinyRequest({ chat_template: "{{ raise_exception('nope') }}" })), 400, {
      param: "messages",
      message: /nope/,
    });
    expectApiError(
      await chat(h, tinyRequest({ chat_template: "{% for i in range(200000) %}x{% endfor %}" })),
      400,
      { param: "chat_template", code: "template_output_too_large" },
    );
  });

  it("the model's own template renders in the pool too", async () => {
    const before = rendersMetric((await get(h, "/metrics", {})).text, "rendered");
    expect((await chat(h, tinyRequest())).status).toBe(200);
    expect(rendersMetric((await get(h, "/metrics", {})).text, "rendered")).toBe(before + 1);
  });
});

describe("without the trust flag (the default)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness((models) => addSyntheticModel(models, "tiny").then(() => undefined));
  });
  afterAll(() => h?.dispose());

  it("a request template is a 400 naming chat_template, rendered nowhere", async () => {
    for (const template of [LOOP, "{{ messages[0].content }}"]) {
      const e = expectApiError(await chat(h, tinyRequest({ chat_template: template })), 400, {
        param: "chat_template",
        code: "untrusted_chat_template",
      });
      expect(e.message).toContain("--trust-request-chat-template");
    }
    expect(rendersMetric((await get(h, "/metrics", {})).text, "timed_out")).toBe(0);
  });

  it("chat_template_kwargs and the model's template still work", async () => {
    const r = await chat(
      h,
      tinyRequest({ chat_template_kwargs: { custom_flag: true }, chat_template: null }),
    );
    expect(r.status, r.text).toBe(200);
  });
});
