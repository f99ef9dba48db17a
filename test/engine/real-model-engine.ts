/** A one-worker engine pool on the real q4 model, for a describe block of engine tests. */
import { afterAll, beforeAll } from "vitest";
import type { EngineCoreConfig } from "../../src/core/types.ts";
import { EnginePool } from "../../src/workers/pool.ts";
import { MODEL_DIR } from "../runner/model-fixture.ts";
import { engineConfig } from "./engine-helpers.ts";

/**
 * Registers the enclosing describe's beforeAll (the pool, and engineConfig's defaults for the q4
 * model on 2 threads with `extra`) and afterAll (the pool closed). Read `pool` and `config` in tests.
 */
export function realModelEngine(extra: Partial<EngineCoreConfig>): {
  pool: EnginePool;
  config: EngineCoreConfig;
} {
  const engine = {} as { pool: EnginePool; config: EngineCoreConfig };
  beforeAll(() => {
    engine.pool = new EnginePool({ workers: 1, maxRequestsPerWorker: 64 });
    engine.config = engineConfig(MODEL_DIR, { format: "q4", intraOpThreads: 2, ...extra });
  });
  afterAll(async () => {
    await engine.pool?.close();
  });
  return engine;
}
