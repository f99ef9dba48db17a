/**
 * The Responses route over raw HTTP on synthetic models: reasoning.effort reaches a chat template
 * that reads reasoning_effort and is refused by one that does not; the stream's framing (named
 * events, numbered, no [DONE]); stored responses' raw shapes, methods and per-key visibility;
 * a usage row per response; a response whose row cannot be written is a 500 (an error event in a
 * stream), never answered as stored.
 */
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys } from "../../src/storage/api-keys.ts";
import { type Harness, reply, startEffortHarness } from "./harness.ts";

let h: Harness;

beforeAll(async () => {
  h = await startEffortHarness();
});
afterAll(() => h?.dispose());

async function post(body: unknown, key = h.key) {
  const res = await fetch(`${h.url}/v1/responses`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  return reply<Record<string, unknown>>(res);
}

const inputTokens = (r: { json?: Record<string, unknown> }) =>
  (r.json!.usage as { input_tokens: number }).input_tokens;

describe("POST /v1/responses", () => {
  it("reasoning.effort reaches a template that reads reasoning_effort, and is a 400 elsewhere", async () => {
    const base = { model: "thinker", input: "Hi", max_output_tokens: 1, store: false };
    const low = await post({ ...base, reasoning: { effort: "low" } });
    const high = await post({ ...base, reasoning: { effort: "high" } });
    expect([low.status, high.status]).toEqual([200, 200]);
    expect(inputTokens(high)).toBeGreaterThan(inputTokens(low));
    expect(high.json!.reasoning).toEqual({ effort: "high", summary: null });

    for (const [model, effort] of [
      ["thinker", "minimal"],
      ["tiny", "low"],
    ] as const) {
      const r = await post({ ...base, model, reasoning: { effort } });
      expect(r.status).toBe(400);
      expect(r.json!.error).toMatchObject({ param: "reasoning.effort", code: "unsupported_parameter" });
    }
    // No effort: nothing for the template to read, on either model.
    expect((await post({ ...base, model: "tiny", reasoning: { effort: null } })).status).toBe(200);
  });

  it("answers a developer message alone; reasoning items alone are a 400 naming input", async () => {
    const base = { model: "tiny", max_output_tokens: 1, store: false };
    const developer = await post({
      ...base,
      input: [{ type: "message", role: "developer", content: "Be brief." }],
    });
    expect(developer.status, developer.text).toBe(200);
    const reasoning = await post({
      ...base,
      instructions: "Be brief.",
      input: [
        { type: "reasoning", id: "rs_1", summary: [], content: [{ type: "reasoning_text", text: "hm" }] },
      ],
    });
    expect(reasoning.status).toBe(400);
    expect(reasoning.json!.error).toMatchObject({ param: "input" });
  });

  it("streams named events numbered from 0, ending with response.completed and no [DONE]", async () => {
    const res = await fetch(`${h.url}/v1/responses`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${h.key}` },
      body: JSON.stringify({ model: "tiny", input: "Hi", max_output_tokens: 3, stream: true, store: false }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const blocks = (await res.text()).split("\n\n").filter((b) => b !== "");
    expect(blocks.some((b) => b.includes("[DONE]"))).toBe(false);
    const events = blocks.map((b) => {
      const [eventLine, dataLine] = b.split("\n");
      expect(eventLine).toMatch(/^event: /);
      const data = JSON.parse(dataLine!.slice("data: ".length)) as { type: string; sequence_number: number };
      expect(eventLine).toBe(`event: ${data.type}`);
      return data;
    });
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[0]!.type).toBe("response.created");
    expect(["response.completed", "response.incomplete"]).toContain(events.at(-1)!.type);
  });

  it("stores a response for its key alone: GET, DELETE, 404s, 405s, and the usage row", async () => {
    const created = await post({ model: "tiny", input: "Hi", max_output_tokens: 2 });
    expect(created.status).toBe(200);
    const id = created.json!.id as string;
    const headers = { Authorization: `Bearer ${h.key}` };
    const got = await reply<Record<string, unknown>>(await fetch(`${h.url}/v1/responses/${id}`, { headers }));
    expect(got.status).toBe(200);
    expect(got.json).toEqual(created.json);

    const query = await reply(await fetch(`${h.url}/v1/responses/${id}?stream=true`, { headers }));
    expect(query.status).toBe(400);
    expect((query.json as { error: { param: string } }).error.param).toBe("stream");

    const put = await fetch(`${h.url}/v1/responses/${id}`, { method: "PUT", headers });
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("GET, HEAD, DELETE");
    expect((await fetch(`${h.url}/v1/responses`, { headers })).status).toBe(405);

    const db = new DatabaseSync(join(h.root, "ortserve.db"));
    const other = new ApiKeys(db).createKey("other").key;
    const rows = db
      .prepare("SELECT key_id, status, completion_tokens FROM usage WHERE model = 'tiny' AND status = 200")
      .all() as { key_id: number; completion_tokens: number }[];
    db.close();
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect(rows.some((r) => r.completion_tokens === 2)).toBe(true);

    const theirs = { Authorization: `Bearer ${other}` };
    expect((await fetch(`${h.url}/v1/responses/${id}`, { headers: theirs })).status).toBe(404);
    expect((await fetch(`${h.url}/v1/responses/${id}`, { method: "DELETE", headers: theirs })).status).toBe(
      404,
    );
    const continued = await post({ model: "tiny", previous_response_id: id, input: "Again" }, other);
    expect(continued.status).toBe(400);
    expect(continued.json!.error).toMatchObject({
      param: "previous_response_id",
      code: "previous_response_not_found",
    });

    const deleted = await reply(await fetch(`${h.url}/v1/responses/${id}`, { method: "DELETE", headers }));
    expect(deleted.status).toBe(200);
    expect(deleted.json).toEqual({ id, object: "response", deleted: true });
    const gone = await reply(await fetch(`${h.url}/v1/responses/${id}`, { headers }));
    expect(gone.status).toBe(404);
    expect((gone.json as { error: { code: string } }).error.code).toBe("response_not_found");
  });

  it("lists a stored response's input items: the whole conversation, newest first, in pages, for its key alone", async () => {
    const headers = { Authorization: `Bearer ${h.key}` };
    const list = async (id: string, q = "", hdrs = headers) =>
      reply<{
        object: string;
        data: { id: string; type: string; role?: string; content?: { type: string; text: string }[] }[];
        first_id: string | null;
        last_id: string | null;
        has_more: boolean;
      }>(await fetch(`${h.url}/v1/responses/${id}/input_items${q}`, { headers: hdrs }));
    const first = await post({
      model: "tiny",
      input: [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "input_text", text: "Hi" }] },
      ],
      max_output_tokens: 2,
    });
    const second = await post({
      model: "tiny",
      previous_response_id: first.json!.id,
      input: "Again",
      max_output_tokens: 2,
    });
    const id = second.json!.id as string;

    const all = await list(id, "?order=asc");
    expect(all.status).toBe(200);
    // The previous response's input and output, then this input.
    expect(all.json!.data.map((i) => [i.type, i.role])).toEqual([
      ["message", "system"],
      ["message", "user"],
      ["message", "assistant"],
      ["message", "user"],
    ]);
    expect(all.json!.data[3]!.content).toEqual([{ type: "input_text", text: "Again" }]);
    // The previous output keeps its id; the ids are the same at every listing.
    const output = first.json!.output as { id: string }[];
    expect(all.json!.data[2]!.id).toBe(output[0]!.id);
    expect((await list(id, "?order=asc")).json!.data.map((i) => i.id)).toEqual(
      all.json!.data.map((i) => i.id),
    );
    expect(all.json).toMatchObject({ object: "list", has_more: false, first_id: all.json!.data[0]!.id });

    const desc = await list(id);
    expect(desc.json!.data.map((i) => i.id)).toEqual(all.json!.data.map((i) => i.id).reverse());
    const page = await list(id, "?limit=2");
    expect(page.json).toMatchObject({
      has_more: true,
      first_id: desc.json!.data[0]!.id,
      last_id: desc.json!.data[1]!.id,
    });
    const next = await list(id, `?limit=2&after=${page.json!.last_id}`);
    expect(next.json!.data.map((i) => i.id)).toEqual(desc.json!.data.slice(2).map((i) => i.id));
    expect(next.json!.has_more).toBe(false);

    for (const [q, param] of [
      ["?limit=0", "limit"],
      ["?limit=101", "limit"],
      ["?order=up", "order"],
      ["?after=msg_nope", "after"],
      ["?before=x", "before"],
    ] as const) {
      const r = await list(id, q);
      expect(r.status, q).toBe(400);
      expect((r.json as unknown as { error: { param: string } }).error.param).toBe(param);
    }
    const db = new DatabaseSync(join(h.root, "ortserve.db"));
    const other = new ApiKeys(db).createKey("lister").key;
    db.close();
    expect((await list(id, "", { Authorization: `Bearer ${other}` })).status).toBe(404);
    const post405 = await fetch(`${h.url}/v1/responses/${id}/input_items`, { method: "POST", headers });
    expect(post405.status).toBe(405);
    expect(post405.headers.get("allow")).toBe("GET, HEAD");
  });

  it("truncation auto drops the oldest turns until the conversation fits; disabled refuses it", async () => {
    const long = Array.from({ length: 400 }, (_, i) => `word${i}`).join(" ");
    const last = { role: "user", content: "Short question?" };
    const input = [{ role: "user", content: long }, { role: "assistant", content: "Noted." }, last];
    const base = { model: "tiny", input, max_output_tokens: 4, store: false };
    const refused = await post(base);
    expect(refused.status).toBe(400);
    const auto = await post({ ...base, truncation: "auto" });
    expect(auto.status, JSON.stringify(auto.json)).toBe(200);
    expect(auto.json!.truncation).toBe("auto");
    // Exactly the last turn is left: the prompt is the one that turn alone makes.
    const alone = await post({ ...base, input: [last] });
    expect(inputTokens(auto)).toBe(inputTokens(alone));
    // Turns that fit are kept: a short first turn stays.
    const short = [{ role: "user", content: "Hi." }, { role: "assistant", content: "Hello." }, last];
    const kept = await post({ ...base, input: short, truncation: "auto" });
    const whole = await post({ ...base, input: short });
    expect(inputTokens(kept)).toBe(inputTokens(whole));
    // When the last turn alone does not fit, nothing is dropped and it is refused as without.
    const tooLong = await post({
      ...base,
      input: [last, { role: "user", content: long }],
      truncation: "auto",
    });
    expect(tooLong.status).toBe(400);
    const paramOf = (r: { json?: Record<string, unknown> }) => (r.json!.error as { param: string }).param;
    expect(paramOf(tooLong)).toBe(paramOf(refused));
  });

  it("a response whose row cannot be written is a 500, or a stream's error event in place of its end", async () => {
    // A real refusal by the database, of stored responses only (usage rows still commit).
    const db = new DatabaseSync(join(h.root, "ortserve.db"));
    db.exec(
      "CREATE TRIGGER refuse_responses BEFORE INSERT ON responses BEGIN SELECT RAISE(ABORT, 'disk full'); END",
    );
    try {
      const base = { model: "tiny", input: "Hi", max_output_tokens: 2 };
      const plain = await post(base);
      expect(plain.status).toBe(500);
      expect((plain.json!.error as { message: string }).message).toContain("could not be stored");
      expect((await post({ ...base, store: false })).status).toBe(200);

      const res = await fetch(`${h.url}/v1/responses`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${h.key}` },
        body: JSON.stringify({ ...base, stream: true }),
      });
      expect(res.status).toBe(200);
      const events = (await res.text())
        .split("\n\n")
        .filter((b) => b !== "")
        .map(
          (b) =>
            JSON.parse(b.split("\n")[1]!.slice("data: ".length)) as { type: string; sequence_number: number },
        );
      expect(events.map((e) => e.type)).not.toContain("response.completed");
      expect(events.at(-1)).toMatchObject({ type: "error", code: "internal_error" });
      expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
      const statuses = db
        .prepare("SELECT status FROM usage ORDER BY id DESC LIMIT 3")
        .all()
        .map((r) => (r as { status: number }).status);
      expect(statuses).toEqual([500, 200, 500]);
    } finally {
      db.exec("DROP TRIGGER refuse_responses");
      db.close();
    }
    expect((await post({ model: "tiny", input: "Hi", max_output_tokens: 1 })).status).toBe(200);
  });
});
