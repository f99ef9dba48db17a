import { describe, expect, it } from "vitest";
import { type StopStep, StopStringMatcher } from "../../src/core/output/stop-strings.ts";

/** Pushes every delta, then flushes unless a stop matched. */
function run(stops: string[], include: boolean, deltas: string[]) {
  const matcher = new StopStringMatcher(stops, include);
  const steps: StopStep[] = deltas.map((d) => matcher.push(d));
  const tail = matcher.flush();
  const stop = steps.find((s) => s.stop !== undefined)?.stop;
  return { sent: steps.map((s) => s.text), tail, stop, text: steps.map((s) => s.text).join("") + tail };
}

describe("StopStringMatcher", () => {
  it("cuts a stop at the very start, sending nothing", () => {
    expect(run(["Hello"], false, ["Hello world"])).toMatchObject({ text: "", stop: "Hello" });
    expect(run(["Hello"], false, ["He", "llo", " world"])).toMatchObject({ text: "", stop: "Hello" });
  });

  it("finds a stop split across deltas and drops what follows it", () => {
    const r = run(["llo w"], false, ["He", "l", "lo", " wor", "ld"]);
    expect(r).toMatchObject({ text: "He", stop: "llo w", tail: "" });
    expect(r.sent).toEqual(["", "", "H", "e", ""]);
  });

  it("holds back longest stop − 1 characters while streaming and releases them on flush", () => {
    const r = run(["STOP", "X"], false, ["abcdef", "gh"]);
    expect(r.sent).toEqual(["abc", "de"]);
    expect(r.tail).toBe("fgh");
    expect(r.stop).toBeUndefined();
  });

  it("lets the first stop in the list win, not the earliest position", () => {
    expect(run(["bc", "ab"], false, ["abc"])).toMatchObject({ text: "a", stop: "bc" });
    expect(run(["ab", "bc"], false, ["abc"])).toMatchObject({ text: "", stop: "ab" });
    // Delta by delta, the stop that completes first wins.
    expect(run(["bc", "ab"], false, ["a", "b", "c"])).toMatchObject({ text: "", stop: "ab" });
    // Overlapping candidates: "aab" holds "ab" at 1; the first occurrence is used.
    expect(run(["ab"], false, ["aabab"])).toMatchObject({ text: "a", stop: "ab" });
  });

  it("keeps the stop with includeStopStrInOutput, drops the rest, and does not hold back", () => {
    const r = run(["END"], true, ["foo", "EN", "Dbar"]);
    expect(r.sent).toEqual(["foo", "EN", "D"]);
    expect(r).toMatchObject({ text: "fooEND", stop: "END", tail: "" });
    expect(run(["END"], true, ["xEND"])).toMatchObject({ text: "xEND", stop: "END" });
  });

  it("ignores text after a stop", () => {
    const matcher = new StopStringMatcher(["."], false);
    expect(matcher.push("a.b")).toEqual({ text: "a", stop: "." });
    expect(matcher.stopped).toBe(true);
    expect(matcher.push("more")).toEqual({ text: "" });
    expect(matcher.flush()).toBe("");
  });

  it("does not search unchecked text, but a stop may start in it", () => {
    const matcher = new StopStringMatcher(["ab", "cd"], false);
    expect(matcher.push("xab", false)).toEqual({ text: "xa" });
    expect(matcher.push("c", false)).toEqual({ text: "b" });
    expect(matcher.push("d")).toEqual({ text: "", stop: "cd" });
  });

  it("counts held-back characters in code points and never splits a surrogate pair", () => {
    const r = run(["😀!"], false, ["ab😀", "c"]);
    expect(r.sent).toEqual(["ab", "😀"]);
    expect(r.tail).toBe("c");
    expect(run(["😀!"], false, ["ab😀", "!x"])).toMatchObject({ text: "ab", stop: "😀!" });
  });

  it("passes text straight through without stops", () => {
    expect(run([], false, ["a", "b"]).sent).toEqual(["a", "b"]);
  });

  it("rejects an empty stop string", () => {
    expect(() => new StopStringMatcher(["x", ""], false)).toThrow(RangeError);
  });

  it("never sends text it later takes back, and cuts where a whole-text search would", () => {
    const random = mulberry32(7);
    const pick = (s: string) => s[Math.floor(random() * s.length)];
    for (let round = 0; round < 2000; round++) {
      const text = Array.from({ length: 5 + Math.floor(random() * 30) }, () => pick("abc ")).join("");
      const stops = Array.from({ length: 1 + Math.floor(random() * 3) }, () =>
        Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick("abc")).join(""),
      );
      const include = random() < 0.5;
      const deltas: string[] = [];
      for (let i = 0; i < text.length; ) {
        const n = 1 + Math.floor(random() * 4);
        deltas.push(text.slice(i, i + n));
        i += n;
      }
      const matcher = new StopStringMatcher(stops, include);
      let sent = "";
      const prefixes: string[] = [];
      let stop: string | undefined;
      for (const d of deltas) {
        const step = matcher.push(d);
        sent += step.text;
        prefixes.push(sent);
        stop = step.stop;
        if (stop !== undefined) break;
      }
      if (stop === undefined) sent += matcher.flush();
      const expected = wholeTextCut(text, deltas, stops, include);
      expect({ sent, stop }).toEqual(expected);
      for (const p of prefixes) expect(sent.startsWith(p)).toBe(true);
      if (!include && stop === undefined) for (const s of stops) expect(sent).not.toContain(s);
    }
  });
});

/**
 * The cut from the whole text: the first delta whose end completes any stop
 * decides; among the stops completed there, the first in the list, at its
 * first occurrence.
 */
function wholeTextCut(text: string, deltas: string[], stops: string[], include: boolean) {
  let end = 0;
  for (const d of deltas) {
    const before = end;
    end += d.length;
    const seen = text.slice(0, end);
    for (const stop of stops) {
      const at = seen.indexOf(stop);
      if (at === -1 || at + stop.length <= before) continue;
      return { sent: text.slice(0, include ? at + stop.length : at), stop };
    }
  }
  return { sent: text, stop: undefined };
}

function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
