import { afterEach, describe, expect, it, vi } from "vitest";
import { kvCacheDtypeFor } from "../../src/core/runner/ort-session.ts";

describe("kvCacheDtypeFor", () => {
  afterEach(() => vi.unstubAllEnvs());

  it("keeps float16 for q4 and float32 for fp32 unless asked otherwise", () => {
    vi.stubEnv("ORTSERVE_KV_CACHE_DTYPE", undefined);
    expect(kvCacheDtypeFor("q4")).toBe("float16");
    expect(kvCacheDtypeFor("fp32")).toBe("float32");
    expect(kvCacheDtypeFor("q4", "int8")).toBe("int8");
  });

  it("lets ORTSERVE_KV_CACHE_DTYPE stand in for auto, and refuses a value it does not know", () => {
    vi.stubEnv("ORTSERVE_KV_CACHE_DTYPE", "int8");
    expect(kvCacheDtypeFor("fp32")).toBe("int8");
    expect(kvCacheDtypeFor("fp32", "float32")).toBe("float32");
    vi.stubEnv("ORTSERVE_KV_CACHE_DTYPE", "fp8");
    expect(() => kvCacheDtypeFor("q4")).toThrow(
      'ORTSERVE_KV_CACHE_DTYPE must be float32, float16 or int8 (got "fp8")',
    );
  });
});
