/** FairShareQueue: admission alternates between callers' shares of equal priority. */
import { describe, expect, it } from "vitest";
import { FairShareQueue, type SharedQueued } from "../../src/core/scheduler/fair-share.ts";

interface Item extends SharedQueued {
  label: string;
}

let arrivals = 0;
const item = (shareKey: string, label: string, priority = 0): Item => ({
  shareKey,
  label,
  priority,
  arrival: arrivals++,
});

function drain(q: FairShareQueue<Item>): string[] {
  const out: string[] = [];
  for (let next = q.shift(); next; next = q.shift()) out.push(next.label);
  return out;
}

describe("FairShareQueue", () => {
  it("a share that arrives after another's flood is admitted within one admission", () => {
    const q = new FairShareQueue<Item>("fcfs");
    for (let i = 0; i < 64; i++) q.push(item("a", `a${i}`));
    q.push(item("b", "b0"));
    expect(q.length).toBe(65);
    expect(q.waitingShares).toBe(2);
    const order = drain(q);
    expect(order.indexOf("b0")).toBe(1);
    // Within a share, arrival order.
    expect(order.filter((l) => l.startsWith("a"))).toEqual(Array.from({ length: 64 }, (_, i) => `a${i}`));
  });

  it("alternates between shares, each in arrival order", () => {
    const q = new FairShareQueue<Item>("fcfs");
    for (const l of ["a0", "a1", "a2"]) q.push(item("a", l));
    for (const l of ["b0", "b1"]) q.push(item("b", l));
    q.push(item("c", "c0"));
    expect(drain(q)).toEqual(["a0", "b0", "c0", "a1", "b1", "a2"]);
  });

  it("under the priority policy, priority first; shares alternate among equal priorities", () => {
    const q = new FairShareQueue<Item>("priority");
    q.push(item("a", "a-low", 5));
    q.push(item("a", "a0", 1));
    q.push(item("a", "a1", 1));
    q.push(item("b", "b0", 1));
    q.push(item("b", "b-low", 5));
    // b was admitted less recently than a when the lower priority's turn comes.
    expect(drain(q)).toEqual(["a0", "b0", "a1", "b-low", "a-low"]);
  });

  it("removes a waiting request (an abort) and keeps its share's order", () => {
    const q = new FairShareQueue<Item>("fcfs");
    const items = ["a0", "a1", "a2"].map((l) => item("a", l));
    for (const i of items) q.push(i);
    expect(q.remove(items[1]!)).toBe(true);
    expect(q.remove(items[1]!)).toBe(false);
    expect([...q].map((i) => i.label)).toEqual(["a0", "a2"]);
    expect(drain(q)).toEqual(["a0", "a2"]);
    expect(q.length).toBe(0);
    expect(q.waitingShares).toBe(0);
  });

  it("requests without a share key share one", () => {
    const q = new FairShareQueue<Item>("fcfs");
    q.push({ label: "x0", priority: 0, arrival: arrivals++ });
    q.push({ label: "x1", priority: 0, arrival: arrivals++ });
    q.push(item("b", "b0"));
    expect(drain(q)).toEqual(["x0", "b0", "x1"]);
  });
});
