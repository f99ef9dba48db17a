import { describe, expect, it } from "vitest";
import { kvCacheDtypeFor } from "../../src/core/runner/ort-session.ts";
import { parseRuntimeFlags } from "../../src/core/runtime-flags.ts";

describe("kvCacheDtypeFor", () => {
  const none = parseRuntimeFlags({});

  it("keeps float16 for q4 and float32 for fp32 unless asked otherwise", () => {
    expect(kvCacheDtypeFor("q4", "auto", none)).toBe("float16");
    expect(kvCacheDtypeFor("fp32", "auto", none)).toBe("float32");
    expect(kvCacheDtypeFor("q4", "int8", none)).toBe("int8");
  });

  it("lets ORTSERVE_KV_CACHE_DTYPE stand in for auto, and refuses a value it does not know", () => {
    const int8 = parseRuntimeFlags({ ORTSERVE_KV_CACHE_DTYPE: "int8" });
    expect(kvCacheDtypeFor("fp32", "auto", int8)).toBe("int8");
    expect(kvCacheDtypeFor("fp32", "float32", int8)).toBe("float32");
    expect(() => parseRuntimeFlags({ ORTSERVE_KV_CACHE_DTYPE: "fp8" })).toThrow(
      'ORTSERVE_KV_CACHE_DTYPE must be float32, float16 or int8 (got "fp8")',
    );
  });
});
