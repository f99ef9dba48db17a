/**
 * string() bounds count characters as JSON Schema's minLength and maxLength do (code points), so a
 * request the published schema allows is not refused for characters outside the BMP.
 */
import { describe, expect, it } from "vitest";
import { string } from "../../src/protocol/schema.ts";
import { codePointLength } from "../../src/util/code-points.ts";

describe("string() lengths in code points", () => {
  const bold = "𝕋"; // U+1D54B: two UTF-16 units
  it("counts a surrogate pair once and a lone surrogate as one", () => {
    expect(codePointLength(bold.repeat(3))).toBe(3);
    expect(codePointLength(`a${bold}b`)).toBe(3);
    expect(codePointLength("\ud835")).toBe(1);
    expect(codePointLength("\udc4bx\ud835")).toBe(3);
  });

  it("takes 64 characters of two units each under maxLength 64 and refuses 65", () => {
    const name = string({ minLength: 1, maxLength: 64 });
    expect(name.parse(bold.repeat(64), "name")).toBe(bold.repeat(64));
    expect(() => name.parse(bold.repeat(65), "name")).toThrow(/at most 64 characters/);
  });

  it("refuses one character of two units under minLength 2", () => {
    expect(() => string({ minLength: 2 }).parse(bold, "x")).toThrow(/at least 2 characters/);
    expect(string({ minLength: 2 }).parse(bold.repeat(2), "x")).toBe(bold.repeat(2));
  });
});
