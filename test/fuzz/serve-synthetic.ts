/**
 * A server for fuzzing: the synthetic model (fast, context 256) in a temporary models directory,
 * a temporary database, and the key from ORTSERVE_API_KEY. Prints `ready <url>` once listening;
 * SIGTERM drains it and removes the temporary files.
 *
 *   ORTSERVE_API_KEY=... node test/fuzz/serve-synthetic.ts
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "../../src/observability/logger.ts";
import { SERVER_DEFAULTS, startServer } from "../../src/server.ts";
import { buildSyntheticModel, SYNTHETIC } from "../fixtures/synthetic-model.ts";

if (!process.env.ORTSERVE_API_KEY) throw new Error("set ORTSERVE_API_KEY");
const root = mkdtempSync(join(tmpdir(), "ortserve-fuzz-"));
const modelsDir = join(root, "models");
mkdirSync(modelsDir);
await buildSyntheticModel(modelsDir, ["fp32"], "tiny");
const server = await startServer({
  ...SERVER_DEFAULTS,
  port: 0,
  modelsDir,
  dbPath: join(root, "ortserve.db"),
  threads: 1,
  maxModelLen: SYNTHETIC.contextLength,
  logger: createLogger("warn"),
  announceKey: () => {},
});
process.stdout.write(`ready ${server.url}\n`);
process.once("SIGTERM", () => {
  server
    .close()
    .finally(() => rmSync(root, { recursive: true, force: true }))
    .then(() => process.exit(0));
});
