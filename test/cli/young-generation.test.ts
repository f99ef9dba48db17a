import { describe, expect, it } from "vitest";
import { hasSemiSpaceFlag } from "../../src/cli/young-generation.ts";

describe("the server's young-generation cap", () => {
  it("sees a size the operator chose, on the command line or in NODE_OPTIONS, in either spelling", () => {
    expect(hasSemiSpaceFlag([], undefined)).toBe(false);
    expect(hasSemiSpaceFlag(["--enable-source-maps"], "--max-old-space-size=4096")).toBe(false);
    expect(hasSemiSpaceFlag(["--max-semi-space-size=64"], undefined)).toBe(true);
    expect(hasSemiSpaceFlag(["--max-semi-space-size", "64"], undefined)).toBe(true);
    expect(hasSemiSpaceFlag([], "--inspect  --max_semi_space_size=32")).toBe(true);
  });
});
