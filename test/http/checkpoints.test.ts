/**
 * GET /v1/preview/models/{model_id}/checkpoints over raw HTTP: cursor pagination walked end to end
 * over 250 checkpoints in both orders and several page sizes, every query-parameter error, empty
 * pages, and the `<id>:step<N>` names in /v1/models.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addListingOnlyModel,
  type CheckpointSpec,
  expectApiError,
  get,
  type Harness,
  newCheckpoint,
  startHarness,
  writeCheckpointMeta,
} from "./harness.ts";

interface Page {
  object: string;
  data: { id: string; step: number; metrics: Record<string, number> }[];
  has_more: boolean;
  first_id: string;
  last_id: string;
}

const COUNT = 250;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let h: Harness;
/** The checkpoints of model "trained", sorted by step. */
let checkpoints: CheckpointSpec[];

beforeAll(async () => {
  h = await startHarness((models) => {
    const trained = addListingOnlyModel(models, "trained");
    // Steps with gaps, written in an order unrelated to the step (directory names sort otherwise).
    const all = Array.from({ length: COUNT }, (_, i) => newCheckpoint(i * 7 + (i % 3)));
    const shuffled = all.map((c, i) => ({ c, key: (i * 101) % COUNT }));
    shuffled.sort((a, b) => a.key - b.key);
    shuffled.forEach(({ c }, i) => {
      writeCheckpointMeta(trained, `ckpt-${String(i).padStart(3, "0")}`, c);
    });
    checkpoints = all.toSorted((a, b) => a.step - b.step);
    addListingOnlyModel(models, "untrained");
  });
});

afterAll(async () => {
  await h?.dispose();
});

function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}

async function page(model: string, params: Record<string, string | number | undefined> = {}) {
  return get<Page>(h, `/v1/preview/models/${encodeURIComponent(model)}/checkpoints${query(params)}`);
}

function expectPageShape(p: Page): void {
  expect(Object.keys(p).sort()).toEqual(["data", "first_id", "has_more", "last_id", "object"]);
  expect(p.object).toBe("list");
  expect(typeof p.has_more).toBe("boolean");
  expect(p.first_id).toBe(p.data[0]?.id ?? "");
  expect(p.last_id).toBe(p.data.at(-1)?.id ?? "");
  for (const c of p.data) {
    expect(Object.keys(c).sort()).toEqual(["id", "metrics", "step"]);
    expect(c.id).toMatch(UUID);
    expect(Number.isInteger(c.step)).toBe(true);
  }
}

describe("cursor pagination", () => {
  for (const order of ["asc", "desc", undefined] as const)
    for (const limit of [1, 7, 100, undefined] as const)
      it(`visits every checkpoint exactly once: order=${order ?? "(default)"} limit=${limit ?? "(default)"}`, async () => {
        const expected = order === "desc" ? checkpoints.toReversed() : checkpoints;
        const size = limit ?? 20;
        const seen: Page["data"] = [];
        let after: string | undefined;
        let pages = 0;
        while (true) {
          const r = await page("trained", { order, limit, after });
          expect(r.status, r.text).toBe(200);
          const p = r.json;
          expectPageShape(p);
          pages++;
          seen.push(...p.data);
          if (!p.has_more) {
            expect(p.data.length).toBeGreaterThan(0);
            expect(p.data.length).toBeLessThanOrEqual(size);
            break;
          }
          expect(p.data).toHaveLength(size);
          after = p.last_id;
          expect(pages).toBeLessThanOrEqual(COUNT);
        }
        expect(pages).toBe(Math.ceil(COUNT / size));
        expect(seen).toEqual(expected.map((c) => ({ id: c.id, step: c.step, metrics: c.metrics })));
      });

  it("the cursor is the last id of the previous page, in either letter case", async () => {
    const first = (await page("trained", { limit: 3 })).json;
    const upper = (await page("trained", { limit: 3, after: first.last_id.toUpperCase() })).json;
    expect(upper.data.map((c) => c.step)).toEqual(checkpoints.slice(3, 6).map((c) => c.step));
  });

  it("after the last checkpoint: an empty page with empty first_id and last_id", async () => {
    for (const [order, last] of [
      ["asc", checkpoints.at(-1)!],
      ["desc", checkpoints[0]!],
    ] as const) {
      const r = await page("trained", { order, after: last.id });
      expect(r.status).toBe(200);
      expectPageShape(r.json);
      expect(r.json).toEqual({ object: "list", data: [], has_more: false, first_id: "", last_id: "" });
    }
  });

  it("a model without checkpoints: an empty page", async () => {
    const r = await page("untrained");
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ object: "list", data: [], has_more: false, first_id: "", last_id: "" });
  });

  it("order=desc&limit=1 finds the latest checkpoint", async () => {
    const r = await page("trained", { order: "desc", limit: 1 });
    expect(r.json.data).toEqual([checkpoints.at(-1)]);
    expect(r.json.has_more).toBe(true);
  });
});

describe("errors", () => {
  it("an unknown model is a 404 naming model", async () => {
    for (const model of ["nope", "trained:step7", "TRAINED"]) {
      const e = expectApiError(await page(model), 404, {
        param: "model",
        type: "not_found_error",
        code: "model_not_found",
      });
      expect(e.message).toContain(model);
    }
  });

  for (const limit of ["0", "101", "abc", "2.5", "-1", "", " 5", "1e1", "0x10", "99999999999999999999"])
    it(`limit=${JSON.stringify(limit)} is a 400 naming limit`, async () => {
      expectApiError(await page("trained", { limit }), 400, {
        param: "limit",
        type: "invalid_request_error",
      });
    });

  it("limit=1 and limit=100 are the accepted edges", async () => {
    expect((await page("trained", { limit: 1 })).json.data).toHaveLength(1);
    expect((await page("trained", { limit: 100 })).json.data).toHaveLength(100);
  });

  for (const order of ["sideways", "ASC", "", "descending"])
    it(`order=${JSON.stringify(order)} is a 400 naming order`, async () => {
      expectApiError(await page("trained", { order }), 400, { param: "order" });
    });

  it("an unknown after cursor is a 404 naming after; an empty one a 400", async () => {
    for (const after of [randomUUID(), "not-a-uuid"])
      expectApiError(await page("trained", { after }), 404, { param: "after", code: "checkpoint_not_found" });
    expectApiError(await page("trained", { after: "" }), 400, { param: "after" });
  });

  it("a cursor from another model is a 404", async () => {
    expectApiError(await page("untrained", { after: checkpoints[0]!.id }), 404, { param: "after" });
  });

  it("a repeated parameter is a 400 naming it", async () => {
    const r = await get(h, "/v1/preview/models/trained/checkpoints?limit=1&limit=2");
    expectApiError(r, 400, { param: "limit" });
  });

  it("an unknown query parameter is a 400 naming it", async () => {
    const r = await get(h, "/v1/preview/models/trained/checkpoints?cursor=abc");
    expectApiError(r, 400, { param: "cursor", code: "unknown_parameter" });
  });
});

describe("/v1/models", () => {
  it("lists each model and each of its checkpoints as <id>:step<N>", async () => {
    const r = await get<{ object: string; data: { id: string; object: string; parent?: string }[] }>(
      h,
      "/v1/models",
    );
    expect(r.status).toBe(200);
    expect(r.json.object).toBe("list");
    const ids = r.json.data.map((m) => m.id);
    expect(ids).toEqual(["trained", ...checkpoints.map((c) => `trained:step${c.step}`), "untrained"]);
    for (const m of r.json.data) expect(m.object).toBe("model");
    const steps = r.json.data.filter((m) => m.id.includes(":step"));
    for (const m of steps) expect(m.parent).toBe("trained");
  });
});
