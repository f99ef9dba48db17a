/** AdmissionControl's bookkeeping on a fake clock: waiting count, per-key concurrency, and the token window. */
import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/errors.ts";
import { AdmissionControl } from "../../src/serving/admission.ts";

function refusal(f: () => unknown): ApiError {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error("expected a refusal");
}

describe("AdmissionControl", () => {
  it("counts a request as waiting until it starts, and frees its place once", () => {
    const a = new AdmissionControl({ maxWaiting: 2 });
    const t1 = a.admit("k");
    const t2 = a.admit("k");
    expect(a.waiting).toBe(2);
    expect(refusal(() => a.admit("k"))).toMatchObject({ status: 503, retryAfterSeconds: 1 });
    t1.started();
    t1.started();
    expect(a.waiting).toBe(1);
    a.admit("k");
    t2.release(0);
    t2.release(0);
    expect(a.waiting).toBe(1);
    expect(a.refusals).toEqual({ waiting_full: 1, key_concurrency: 0, key_tokens: 0 });
  });

  it("limits each key's concurrent requests separately", () => {
    const a = new AdmissionControl({ maxConcurrentPerKey: 1 });
    const t = a.admit("a");
    a.admit("b");
    expect(refusal(() => a.admit("a"))).toMatchObject({ status: 429, type: "requests" });
    t.release(0);
    a.admit("a");
  });

  it("answers a key over its own limit with 429 even while the shared queue is full", () => {
    const a = new AdmissionControl({ maxWaiting: 1, maxConcurrentPerKey: 1 });
    a.admit("a");
    expect(refusal(() => a.admit("a"))).toMatchObject({ status: 429, type: "requests" });
    expect(refusal(() => a.admit("b"))).toMatchObject({ status: 503 });
    expect(a.refusals).toEqual({ waiting_full: 1, key_concurrency: 1, key_tokens: 0 });
  });

  it("refuses a key at its tokens per minute until enough of them are a minute old", () => {
    let now = 0;
    const a = new AdmissionControl({ tokensPerMinutePerKey: 100 }, () => now);
    a.admit("k").release(60);
    now = 20_000;
    a.admit("k").release(50);
    now = 30_000;
    const e = refusal(() => a.admit("k"));
    // 110 used; the first 60 leave the window at 60 s, i.e. 30 s from now.
    expect(e).toMatchObject({
      status: 429,
      type: "tokens",
      code: "rate_limit_exceeded",
      retryAfterSeconds: 30,
    });
    a.admit("other").release(0);
    now = 60_000;
    a.admit("k").release(0);
    expect(a.refusals.key_tokens).toBe(1);
  });

  it("refuses limits that are not non-negative integers", () => {
    expect(() => new AdmissionControl({ maxWaiting: -1 })).toThrow(RangeError);
  });
});
