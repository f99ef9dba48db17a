/**
 * Usage records over raw HTTP: one durable row per finished chat completion — the caller's key,
 * team and project (from `Compat-Project` or `OpenAI-Project`), model and checkpoint, request id,
 * token counts and status — for successes and for errors after authentication. Malformed project
 * headers are 400s naming the header; OpenAI-Project may carry a project id alone.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addCheckpoint } from "../../src/models/checkpoint-install.ts";
import { writeSyntheticGguf } from "../fixtures/synthetic-model.ts";
import {
  addSyntheticModel,
  chat,
  chatStream,
  expectApiError,
  get,
  type Harness,
  startHarness,
  tinyRequest,
} from "./harness.ts";

interface UsageRow {
  id: number;
  time: string;
  key_id: number | null;
  team: string | null;
  project: string | null;
  model: string;
  checkpoint: string | null;
  request_id: string | null;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  latency_ms: number;
  status: number;
}

interface Completion {
  id: string;
  model: string;
  usage: {
    prompt_tokens: number;
    completion_tokens: number;
    prompt_tokens_details: { cached_tokens: number };
  };
}

let h: Harness;
let bootstrapKeyId: number;

beforeAll(async () => {
  h = await startHarness(async (models, root) => {
    await addSyntheticModel(models, "tiny");
    await addSyntheticModel(models, "ck");
    await addCheckpoint({
      modelId: "ck",
      ggufPath: writeSyntheticGguf(join(root, "ck-5.gguf"), 5),
      step: 5,
      metrics: { loss: 0.5 },
      modelsDir: models,
      format: "fp32",
      progressStream: { write: () => true, isTTY: false },
    });
  });
  bootstrapKeyId = h.server.storage.keys.listKeys().find((k) => k.name === "bootstrap")!.id;
});

afterAll(async () => {
  await h?.dispose();
});

function rows(requestId: string): UsageRow[] {
  return h.server.storage.db
    .prepare("SELECT * FROM usage WHERE request_id = ? ORDER BY id")
    .all(requestId) as unknown as UsageRow[];
}

function onlyRow(requestId: string): UsageRow {
  const found = rows(requestId);
  expect(found, `usage rows for ${requestId}`).toHaveLength(1);
  return found[0]!;
}

function rowCount(): number {
  return Number((h.server.storage.db.prepare("SELECT count(*) AS n FROM usage").get() as { n: number }).n);
}

let seq = 0;
const rid = (label: string) => `usage-${label}-${++seq}`;

describe("a record for every finished chat completion", () => {
  it("200 with Compat-Project: key, team/project, model, request id, token counts, status", async () => {
    const id = rid("ok");
    const started = new Date().toISOString();
    const r = await chat<Completion>(h, tinyRequest({ max_tokens: 2 }), {
      "Compat-Project": "acme/search",
      "X-Request-Id": id,
    });
    expect(r.status, r.text).toBe(200);
    const row = onlyRow(id);
    expect(row).toMatchObject({
      key_id: bootstrapKeyId,
      team: "acme",
      project: "search",
      model: "tiny",
      checkpoint: null,
      request_id: id,
      prompt_tokens: r.json.usage.prompt_tokens,
      completion_tokens: r.json.usage.completion_tokens,
      cached_tokens: r.json.usage.prompt_tokens_details.cached_tokens,
      status: 200,
    });
    expect(row.latency_ms).toBeGreaterThanOrEqual(0);
    expect(row.time >= started).toBe(true);
    expect(row.time <= new Date().toISOString()).toBe(true);
  });

  it("OpenAI-Project (what the official SDKs send) sets team and project too", async () => {
    const id = rid("openai-project");
    await chat(h, tinyRequest(), { "OpenAI-Project": "team-1/proj.2", "X-Request-Id": id });
    expect(onlyRow(id)).toMatchObject({ team: "team-1", project: "proj.2", status: 200 });
  });

  it("OpenAI-Project with a project id alone (proj_abc123, as the SDKs send it): the project, no team", async () => {
    const id = rid("openai-project-id");
    const r = await chat(h, tinyRequest(), { "OpenAI-Project": "proj_abc123", "X-Request-Id": id });
    expect(r.status).toBe(200);
    expect(onlyRow(id)).toMatchObject({ team: null, project: "proj_abc123", status: 200 });
  });

  it("with both headers Compat-Project wins", async () => {
    const id = rid("both");
    await chat(h, tinyRequest(), {
      "Compat-Project": "a/b",
      "OpenAI-Project": "c/d",
      "X-Request-Id": id,
    });
    expect(onlyRow(id)).toMatchObject({ team: "a", project: "b" });
  });

  it("without a project header team and project are null", async () => {
    const id = rid("no-project");
    await chat(h, tinyRequest(), { "X-Request-Id": id });
    expect(onlyRow(id)).toMatchObject({ team: null, project: null, key_id: bootstrapKeyId });
  });

  it("the key id is the caller's key", async () => {
    const other = h.server.storage.keys.createKey("second");
    const id = rid("other-key");
    await chat(h, tinyRequest(), { Authorization: `Bearer ${other.key}`, "X-Request-Id": id });
    expect(onlyRow(id).key_id).toBe(other.id);
  });

  it("the body's request_id is the record's request id", async () => {
    const id = rid("body-id");
    const r = await chat<Completion>(h, tinyRequest({ request_id: id }));
    expect(r.json.id).toBe(`chatcmpl-${id}`);
    expect(onlyRow(id).status).toBe(200);
  });

  it("a checkpoint by name, and the model alone (its latest checkpoint), record the checkpoint", async () => {
    const named = rid("ckpt");
    const r = await chat<Completion>(h, tinyRequest({ max_tokens: 2 }, "ck:step5"), {
      "X-Request-Id": named,
    });
    expect(r.status, r.text).toBe(200);
    expect(r.json.model).toBe("ck:step5");
    expect(onlyRow(named)).toMatchObject({ model: "ck", checkpoint: "step5", status: 200 });

    const latest = rid("latest");
    const r2 = await chat<Completion>(h, tinyRequest({}, "ck"), { "X-Request-Id": latest });
    expect(r2.json.model).toBe("ck");
    expect(onlyRow(latest)).toMatchObject({ model: "ck", checkpoint: "step5" });
  });

  it("a streamed completion records the streamed token counts", async () => {
    const id = rid("stream");
    const s = await chatStream(
      h,
      tinyRequest({ max_tokens: 3, ignore_eos: true, stream_options: { include_usage: true } }),
      { "X-Request-Id": id, "Compat-Project": "acme/stream" },
    );
    const usage = (s.events.at(-1) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
    expect(onlyRow(id)).toMatchObject({
      team: "acme",
      project: "stream",
      prompt_tokens: usage.prompt_tokens,
      completion_tokens: 3,
      status: 200,
    });
  });

  it("n=2 records the completion tokens of both choices", async () => {
    const id = rid("n2");
    await chat(h, tinyRequest({ n: 2, temperature: 1, max_tokens: 2, ignore_eos: true }), {
      "X-Request-Id": id,
    });
    expect(onlyRow(id).completion_tokens).toBe(4);
  });
});

describe("errors after authentication are recorded with their status", () => {
  it("a validation 400: key, project, request id, status; no tokens", async () => {
    const id = rid("400");
    const r = await chat(h, tinyRequest({ top_p: 5 }), { "X-Request-Id": id, "Compat-Project": "acme/bad" });
    expect(r.status).toBe(400);
    expect(onlyRow(id)).toMatchObject({
      key_id: bootstrapKeyId,
      team: "acme",
      project: "bad",
      request_id: id,
      prompt_tokens: 0,
      completion_tokens: 0,
      status: 400,
    });
  });

  it("an unknown model: 404", async () => {
    const id = rid("404");
    const r = await chat(h, tinyRequest({}, "no-such-model"), { "X-Request-Id": id });
    expect(r.status).toBe(404);
    expect(onlyRow(id)).toMatchObject({ status: 404, key_id: bootstrapKeyId, completion_tokens: 0 });
  });

  it("a 400 from the engine (priority on an fcfs model) names the model", async () => {
    const id = rid("engine-400");
    const r = await chat(h, tinyRequest({ priority: 3 }), { "X-Request-Id": id });
    expect(r.status).toBe(400);
    expect(onlyRow(id)).toMatchObject({ status: 400, model: "tiny", checkpoint: null, completion_tokens: 0 });
  });

  it("a streamed request refused before streaming: its status", async () => {
    const id = rid("stream-400");
    const r = await chat(h, tinyRequest({ stream: true, max_tokens: 10_000 }), { "X-Request-Id": id });
    expect(r.status).toBe(400);
    expect(onlyRow(id)).toMatchObject({ status: 400, model: "tiny" });
  });

  it("a request without a valid key writes nothing", async () => {
    const before = rowCount();
    const r = await chat(h, tinyRequest(), { Authorization: "Bearer wrong", "X-Request-Id": rid("401") });
    expect(r.status).toBe(401);
    expect(rowCount()).toBe(before);
  });

  // Known bug: these are refused by middleware before the chat handler, which alone writes usage.
  const refusedBeforeHandler: { name: string; send(id: string): Promise<number>; status?: number }[] = [
    {
      name: "invalid JSON",
      send: async (id) => (await chat(h, "{", { "X-Request-Id": id })).status,
    },
    {
      name: "a wrong Content-Type",
      send: async (id) =>
        (await chat(h, JSON.stringify(tinyRequest()), { "X-Request-Id": id, "Content-Type": "text/plain" }))
          .status,
    },
    {
      name: "a malformed project header",
      send: async (id) =>
        (await chat(h, tinyRequest(), { "X-Request-Id": id, "Compat-Project": "acme" })).status,
    },
    {
      name: "a body over the size limit",
      send: async (id) =>
        (await chat(h, tinyRequest({ user: "u".repeat(8 << 20) }), { "X-Request-Id": id })).status,
      status: 413,
    },
  ];
  for (const c of refusedBeforeHandler)
    it(`the ${c.status ?? 400} for ${c.name} is recorded`, async () => {
      const id = rid("pre-handler");
      const status = c.status ?? 400;
      expect(await c.send(id)).toBe(status);
      expect(onlyRow(id).status).toBe(status);
    });
});

describe("project headers", () => {
  const malformed = [
    "acme",
    "acme/search/extra",
    "/search",
    "acme/",
    "/",
    "",
    "ac me/search",
    "acme/se@rch",
    "../search",
    "acme/.",
    `${"t".repeat(65)}/p`,
    `t/${"p".repeat(65)}`,
    "ácme/search",
  ];
  // OpenAI-Project also takes a project id alone: only what is not printable ASCII, or too long, is refused.
  const malformedFor: Record<string, string[]> = {
    "Compat-Project": malformed,
    "OpenAI-Project": ["", "ácme/search", "p".repeat(257)],
  };
  for (const header of ["Compat-Project", "OpenAI-Project"])
    for (const value of malformedFor[header]!)
      it(`${header}: ${JSON.stringify(value.length > 20 ? `${value.slice(0, 20)}…` : value)} is a 400 naming the header`, async () => {
        const headers = { [header]: value };
        const r = await chat(h, tinyRequest(), headers);
        const e = expectApiError(r, 400, { param: header, type: "invalid_request_error" });
        expect(e.message).toContain(header);
      });

  it("a malformed OpenAI-Project is a 400 even beside a valid Compat-Project (which wins when both are valid)", async () => {
    const r = await chat(h, tinyRequest(), { "Compat-Project": "a/b", "OpenAI-Project": "p\tq" });
    expectApiError(r, 400, { param: "OpenAI-Project", type: "invalid_request_error" });
  });

  it("a malformed header is refused on the other /v1 routes too", async () => {
    const headers = { Authorization: `Bearer ${h.key}`, "Compat-Project": "nope" };
    expectApiError(await get(h, "/v1/models", headers), 400, { param: "Compat-Project" });
    expectApiError(await get(h, "/v1/preview/models/ck/checkpoints", headers), 400, {
      param: "Compat-Project",
    });
  });

  it("accepts the edges: 64-character parts and every allowed character", async () => {
    for (const value of [`${"t".repeat(64)}/${"p".repeat(64)}`, "A.b_c-9/x", "a/b"]) {
      const id = rid("edge");
      const r = await chat(h, tinyRequest(), { "Compat-Project": value, "X-Request-Id": id });
      expect(r.status, r.text).toBe(200);
      const [team, project] = value.split("/");
      expect(onlyRow(id)).toMatchObject({ team, project });
    }
  });

  it("a malformed header is checked after the key: without a key it is a 401", async () => {
    const r = await chat(h, tinyRequest(), { Authorization: "", "Compat-Project": "nope" });
    expectApiError(r, 401);
  });
});
