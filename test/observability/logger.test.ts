import { afterEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "../../src/observability/logger.ts";

describe("createLogger", () => {
  afterEach(() => vi.unstubAllEnvs());

  it("takes its level from ORTSERVE_LOG_LEVEL", () => {
    vi.stubEnv("ORTSERVE_LOG_LEVEL", "warn");
    const lines: string[] = [];
    const log = createLogger(undefined, {}, (line) => lines.push(line));
    log.info("dropped");
    log.warn("kept");
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(["kept"]);
  });

  it("refuses a level it does not know instead of logging everything", () => {
    for (const value of ["verbose", "toString"]) {
      vi.stubEnv("ORTSERVE_LOG_LEVEL", value);
      expect(() => createLogger()).toThrow(
        `ORTSERVE_LOG_LEVEL must be debug, info, warn, error (got "${value}")`,
      );
    }
  });
});
