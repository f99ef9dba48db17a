/**
 * The Messages route over raw HTTP on synthetic models: output_config.effort reaches a chat
 * template that reads reasoning_effort (in messages and in count_tokens), and is a 400 naming it
 * where no template reads it or no template takes it (xhigh, max).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, reply, startEffortHarness } from "./harness.ts";

let h: Harness;

beforeAll(async () => {
  h = await startEffortHarness();
});
afterAll(() => h?.dispose());

async function post(path: string, body: unknown) {
  const res = await fetch(`${h.url}${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "x-api-key": h.key },
    body: JSON.stringify(body),
  });
  return reply<Record<string, unknown>>(res);
}

type Usage = { input_tokens: number; cache_read_input_tokens?: number };
const promptTokens = (r: { json?: Record<string, unknown> }) => {
  const u = r.json!.usage as Usage;
  return u.input_tokens + (u.cache_read_input_tokens ?? 0);
};

describe("POST /v1/messages output_config.effort", () => {
  const base = { model: "thinker", max_tokens: 1, messages: [{ role: "user", content: "Hi" }] };

  it("reaches a template that reads reasoning_effort, in messages and count_tokens alike", async () => {
    const low = await post("/v1/messages", { ...base, output_config: { effort: "low" } });
    const high = await post("/v1/messages", { ...base, output_config: { effort: "high" } });
    expect([low.status, high.status]).toEqual([200, 200]);
    expect(promptTokens(high)).toBeGreaterThan(promptTokens(low));

    const { max_tokens: _, ...prompt } = base;
    const counted = async (effort: string | null) =>
      (await post("/v1/messages/count_tokens", { ...prompt, output_config: { effort } })).json!
        .input_tokens as number;
    expect(await counted("high")).toBe(promptTokens(high));
    expect(await counted("low")).toBe(promptTokens(low));
    // null is absent: the template sees no effort, as with low (the template reads only high).
    expect(await counted(null)).toBe(promptTokens(low));
  });

  it("is a 400 naming output_config.effort where no template takes it", async () => {
    for (const [model, effort, why] of [
      ["thinker", "xhigh", "no meaning"],
      ["thinker", "max", "no meaning"],
      ["tiny", "low", "does not take a reasoning effort"],
    ] as const)
      for (const path of ["/v1/messages", "/v1/messages/count_tokens"]) {
        const body = path === "/v1/messages" ? { ...base, model } : { model, messages: base.messages };
        const r = await post(path, { ...body, output_config: { effort } });
        expect(r.status, `${path} ${model} ${effort}`).toBe(400);
        const error = (r.json as { type: string; error: { type: string; message: string } }).error;
        expect(error.type).toBe("invalid_request_error");
        expect(error.message).toContain("output_config.effort");
        expect(error.message).toContain(why);
      }
  });
});
