/** The prefix cache owns the blocks it is given: each is kept, or released, and released on eviction. */
import { describe, expect, it } from "vitest";
import { PrefixCache } from "../../src/core/cache/prefix-cache.ts";
import type { KvBlock } from "../../src/core/runner/kv-rows.ts";

class CountedBlock implements KvBlock {
  readonly bytes: number;
  releases = 0;
  constructor(bytes: number) {
    this.bytes = bytes;
  }
  release(): void {
    this.releases++;
  }
}

describe("PrefixCache", () => {
  it("releases the least recently used blocks it evicts, and only those", () => {
    const cache = new PrefixCache(300);
    const [a, b, c, d] = [100, 100, 100, 100].map((n) => new CountedBlock(n)) as CountedBlock[];
    cache.insert("a", a!);
    cache.insert("b", b!);
    cache.insert("c", c!);
    // "a" becomes the most recently used: "b" is the one to go.
    expect(cache.lookup(["a"])).toEqual([a]);
    cache.insert("d", d!);
    expect([a, b, c, d].map((x) => x!.releases)).toEqual([0, 1, 0, 0]);
    expect(cache.has("b")).toBe(false);
    expect(cache.usedBytes).toBe(300);
  });

  it("releases a block it does not keep: a key it already holds, or a block over the whole budget", () => {
    const cache = new PrefixCache(150);
    const first = new CountedBlock(100);
    const duplicate = new CountedBlock(100);
    const huge = new CountedBlock(200);
    cache.insert("k", first);
    cache.insert("k", duplicate);
    cache.insert("h", huge);
    expect([first.releases, duplicate.releases, huge.releases]).toEqual([0, 1, 1]);
    expect(cache.lookup(["k"])).toEqual([first]);
    expect(cache.usedBytes).toBe(100);
  });
});
