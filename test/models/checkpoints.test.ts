import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../../src/errors.ts";
import { type CheckpointPage, listCheckpoints } from "../../src/models/checkpoints.ts";
import { ModelRegistry, type ServedModel } from "../../src/models/registry.ts";
import { tempModelsDir, writeCheckpoint, writeModel } from "./fixtures.ts";

const BIG = 250;
let root: string;
let big: ServedModel;
let small: ServedModel;
let empty: ServedModel;

beforeAll(() => {
  root = tempModelsDir();
  const bigDir = writeModel(root, "big");
  // Random directory names, so the order can only come from the steps.
  for (let i = 0; i < BIG; i++)
    writeCheckpoint(bigDir, `ck-${randomUUID()}`, {
      id: randomUUID(),
      step: i * 3,
      metrics: { loss: 10 - i / 100 },
    });
  const smallDir = writeModel(root, "small");
  for (const step of [40, 10, 50, 20, 30])
    writeCheckpoint(smallDir, `s${step}`, { id: randomUUID(), step, metrics: { loss: step / 10 } });
  writeModel(root, "empty");
  const reg = ModelRegistry.load(root);
  big = reg.get("big")!;
  small = reg.get("small")!;
  empty = reg.get("empty")!;
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

function rejection(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error("expected an ApiError");
}

const steps = (page: CheckpointPage) => page.data.map((c) => c.step);

describe("listCheckpoints", () => {
  it("lists every checkpoint by step ascending by default", () => {
    expect(big.checkpoints).toHaveLength(BIG);
    const page = listCheckpoints(small, {});
    const ids = small.checkpoints.map((c) => c.id);
    expect(page).toEqual({
      object: "list",
      data: small.checkpoints.map((c) => ({ id: c.id, step: c.step, metrics: { loss: c.step / 10 } })),
      has_more: false,
      first_id: ids[0],
      last_id: ids[4],
    });
    expect(steps(page)).toEqual([10, 20, 30, 40, 50]);
    expect(Object.keys(page.data[0]!).sort()).toEqual(["id", "metrics", "step"]);
  });

  it("orders by step either way and continues right after the cursor", () => {
    const id = (step: number) => small.checkpoints.find((c) => c.step === step)!.id;
    expect(steps(listCheckpoints(small, { order: "desc" }))).toEqual([50, 40, 30, 20, 10]);
    const first = listCheckpoints(small, { limit: "2" });
    expect(steps(first)).toEqual([10, 20]);
    expect(first).toMatchObject({ has_more: true, first_id: id(10), last_id: id(20) });
    expect(steps(listCheckpoints(small, { limit: "2", after: id(20) }))).toEqual([30, 40]);
    expect(steps(listCheckpoints(small, { order: "desc", limit: "2", after: id(40) }))).toEqual([30, 20]);
    expect(steps(listCheckpoints(small, { order: "desc", after: id(20) }))).toEqual([10]);
    // Exactly filling the page leaves nothing more.
    expect(listCheckpoints(small, { limit: "5" }).has_more).toBe(false);
    expect(listCheckpoints(small, { limit: "4" }).has_more).toBe(true);
    expect(listCheckpoints(small, { limit: "2", after: id(30) })).toMatchObject({ has_more: false });
    // Cursors compare case-insensitively, as UUIDs do.
    expect(steps(listCheckpoints(small, { after: id(30).toUpperCase() }))).toEqual([40, 50]);
  });

  it("gives an empty page after the last item", () => {
    const last = small.checkpoints.at(-1)!.id;
    expect(listCheckpoints(small, { after: last })).toEqual({
      object: "list",
      data: [],
      has_more: false,
      first_id: "",
      last_id: "",
    });
    expect(listCheckpoints(small, { after: small.checkpoints[0]!.id, order: "desc" }).data).toEqual([]);
  });

  it("handles a model without checkpoints", () => {
    for (const order of ["asc", "desc"]) {
      expect(listCheckpoints(empty, { order })).toEqual({
        object: "list",
        data: [],
        has_more: false,
        first_id: "",
        last_id: "",
      });
    }
    expect(rejection(() => listCheckpoints(empty, { after: randomUUID() })).param).toBe("after");
  });

  it("accepts limits 1 and 100 and defaults to 20", () => {
    expect(listCheckpoints(big, { limit: "1" }).data).toHaveLength(1);
    expect(listCheckpoints(big, { limit: "1" }).has_more).toBe(true);
    expect(listCheckpoints(big, { limit: "100" }).data).toHaveLength(100);
    expect(listCheckpoints(big, {}).data).toHaveLength(20);
    expect(listCheckpoints(big, { limit: 7 }).data).toHaveLength(7);
    expect(listCheckpoints(big, { limit: "007" }).data).toHaveLength(7);
    expect(listCheckpoints(big, { limit: undefined }).data).toHaveLength(20);
  });

  it.each([
    "0",
    "101",
    "abc",
    "2.5",
    "-1",
    "",
    "1e1",
    " 5",
    "+5",
    "5.0",
    "0x10",
    "99999999999999999999",
    2.5,
    0,
    ["1", "2"],
  ])("rejects limit %j with a 400 naming limit", (limit) => {
    const err = rejection(() => listCheckpoints(big, { limit }));
    expect(err.status).toBe(400);
    expect(err.type).toBe("invalid_request_error");
    expect(err.param).toBe("limit");
    expect(err.message).toContain("limit");
  });

  it.each(["ASC", "random", "", ["asc", "desc"]])("rejects order %j with a 400 naming order", (order) => {
    const err = rejection(() => listCheckpoints(small, { order }));
    expect(err.status).toBe(400);
    expect(err.param).toBe("order");
  });

  it.each([
    [randomUUID(), 404],
    ["not-an-id", 404],
    ["", 400],
    [["x"], 400],
  ])("refuses the cursor %j with a %d naming after", (after, status) => {
    const err = rejection(() => listCheckpoints(small, { after }));
    expect(err.status).toBe(status);
    expect(err.param).toBe("after");
  });

  it("rejects a cursor from another model", () => {
    expect(rejection(() => listCheckpoints(small, { after: big.checkpoints[0]!.id })).param).toBe("after");
  });

  it("rejects unknown query parameters, naming them", () => {
    const one = rejection(() => listCheckpoints(small, { before: "x" }));
    expect(one).toMatchObject({ status: 400, param: "before", code: "unknown_parameter" });
    const two = rejection(() => listCheckpoints(small, { limit: "5", foo: "1", bar: "2" }));
    expect(two.param).toBe("foo");
    expect(two.message).toContain("foo");
    expect(two.message).toContain("bar");
  });

  it("returns copies, so a caller cannot change the registry", () => {
    const page = listCheckpoints(small, { limit: "1" });
    page.data[0]!.metrics.loss = 99;
    expect(small.checkpoints[0]!.metrics.loss).toBe(1);
  });

  describe.each([
    ["asc", 7],
    ["asc", undefined],
    ["desc", 7],
    ["desc", undefined],
  ] as const)("walking the checkpoints (order %s, limit %s)", (order, limit) => {
    it("visits each exactly once, in order", () => {
      const pageSize = limit ?? 20;
      const seen: string[] = [];
      let after: string | undefined;
      let pages = 0;
      for (;;) {
        const query: Record<string, unknown> = { order };
        if (limit !== undefined) query.limit = String(limit);
        if (after !== undefined) query.after = after;
        const page = listCheckpoints(big, query);
        pages++;
        expect(page.first_id).toBe(page.data[0]!.id);
        expect(page.last_id).toBe(page.data.at(-1)!.id);
        seen.push(...page.data.map((c) => c.id));
        if (!page.has_more) break;
        expect(page.data).toHaveLength(pageSize);
        after = page.last_id;
      }
      expect(pages).toBe(Math.ceil(BIG / pageSize));
      const expected = big.checkpoints.map((c) => c.id);
      if (order === "desc") expected.reverse();
      expect(seen).toEqual(expected);
      expect(new Set(seen).size).toBe(BIG);
    });
  });
});
