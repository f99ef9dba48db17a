import { describe, expect, it } from "vitest";
import { SequenceSampler } from "../../src/core/sample/sampler.ts";
import { MaskRows, maskWords, type TokenConstraint } from "../../src/core/step/constrain.ts";
import { params } from "../sample/helpers.ts";

/** Allows only the listed tokens, advancing through the list as tokens are accepted. */
class Script implements TokenConstraint {
  accepted: number[] = [];
  private readonly allowed: number[][];
  constructor(allowed: number[][]) {
    this.allowed = allowed;
  }
  async fillMask(mask: Uint32Array): Promise<void> {
    for (const id of this.allowed[this.accepted.length] ?? []) mask[id >>> 5]! |= 1 << (id & 31);
  }
  accept(tokenId: number): boolean {
    this.accepted.push(tokenId);
    return true;
  }
}

describe("the constrain stage", () => {
  it("builds a cleared mask row per constrained sequence and none for the others", async () => {
    const masks = new MaskRows(70);
    expect(maskWords(70)).toBe(3);
    const a = new Script([[1, 65]]);
    const b = new Script([[33]]);
    const rows = await masks.build([{ constraint: a }, {}, { constraint: b }]);
    expect(rows[1]).toBeUndefined();
    expect([...rows[0]!]).toEqual([2, 0, 2]);
    expect([...rows[2]!]).toEqual([0, 2, 0]);
    // Reused buffers are cleared before the next fill.
    a.accept(1);
    const again = await masks.build([{ constraint: new Script([[0]]) }]);
    expect([...again[0]!]).toEqual([1, 0, 0]);
  });

  it("the sampler draws only masked-in tokens, whatever the logits favour", async () => {
    const vocab = 40;
    const logits = Float32Array.from({ length: vocab }, (_, i) => i / 4);
    const constraint = new Script([[3, 7], [12], [5, 6]]);
    const sampler = new SequenceSampler(params({ temperature: 1, seed: 11 }), vocab, []);
    const masks = new MaskRows(vocab);
    const out: number[] = [];
    for (let step = 0; step < 3; step++) {
      const [mask] = await masks.build([{ constraint }]);
      const { tokenId } = sampler.sample(logits, out, mask);
      constraint.accept(tokenId);
      out.push(tokenId);
    }
    expect([3, 7]).toContain(out[0]);
    expect(out[1]).toBe(12);
    expect([5, 6]).toContain(out[2]);
  });
});
