import { describe, expect, it } from "vitest";
import { ByteWriter } from "../../src/models/gguf/byte-writer.ts";

describe("ByteWriter", () => {
  it("keeps every value when writes grow the buffer past its initial 64 KiB", () => {
    const w = new ByteWriter();
    const count = 40_000;
    for (let i = 0; i < count; i++) {
      w.u32(i);
      w.string(`t${i}`);
    }
    const b = w.bytes();
    let at = 0;
    for (let i = 0; i < count; i++) {
      expect(b.readUInt32LE(at)).toBe(i);
      const n = Number(b.readBigUInt64LE(at + 4));
      expect(b.toString("utf8", at + 12, at + 12 + n)).toBe(`t${i}`);
      at += 12 + n;
    }
    expect(at).toBe(b.length);
  });
});
