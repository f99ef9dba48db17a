import { describe, expect, it } from "vitest";
import { formatAmount, ProgressBar } from "../../src/util/progress.ts";

function stream(isTTY: boolean) {
  const out: string[] = [];
  return { isTTY, columns: 100, out, write: (s: string) => out.push(s) };
}

describe("ProgressBar", () => {
  it("prints a few plain lines when not on a terminal", () => {
    const s = stream(false);
    const bar = new ProgressBar({ title: "Extracting", total: 1000, unit: "bytes", stream: s, now: () => 0 });
    for (let i = 0; i <= 1000; i += 10) bar.update(i);
    bar.done();
    const text = s.out.join("");
    expect(text).not.toContain("\r");
    expect(text).not.toContain("\x1b");
    expect(s.out).toHaveLength(5); // title, 25%, 50%, 75%, done
    expect(s.out[1]).toContain("25%");
    expect(s.out[4]).toMatch(/done: 1000 B in 0\.0s/);
  });

  it("redraws one line in place on a terminal, throttled", () => {
    const s = stream(true);
    let t = 0;
    const bar = new ProgressBar({ title: "Converting", total: 30, stream: s, now: () => t });
    for (let i = 1; i <= 29; i++) bar.update(i, undefined, `layer ${i}`); // same instant: one draw
    expect(s.out).toHaveLength(1);
    t += 200;
    bar.update(29, 30, "layer 29");
    bar.update(30); // completion always draws
    expect(s.out).toHaveLength(3);
    expect(s.out.every((l) => l.startsWith("\r"))).toBe(true);
    expect(s.out[2]).toContain("100%");
    expect(s.out[2]).toContain("[########################]");
    bar.done("ok");
    expect(s.out.at(-1)).toBe("\rConverting: ok\x1b[K\n");
  });

  it("ends the line when aborted so an error starts on its own line", () => {
    const s = stream(true);
    const bar = new ProgressBar({ title: "x", total: 10, stream: s, now: () => 0 });
    bar.update(3);
    bar.abort();
    expect(s.out.at(-1)).toBe("\n");
    bar.update(5);
    expect(s.out.at(-1)).toBe("\n");
  });

  it("formats byte amounts in binary units", () => {
    expect(formatAmount(512, "bytes")).toBe("512 B");
    expect(formatAmount(98_362_432, "bytes")).toBe("93.8 MiB");
    expect(formatAmount(7, "count")).toBe("7");
  });
});
