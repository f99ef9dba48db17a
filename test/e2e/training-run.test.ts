/**
 * The offline-evaluation flow end to end, as a user runs it: `ortserve checkpoint import` of a
 * synthetic Hugging Face training run, `ortserve eval --constrained` of every checkpoint (json_valid
 * with the schema enforced among its metrics), then `ortserve serve` and the checkpoint listing read with the official `openai` client — the training metrics and the
 * evaluation's side by side — plus the report's chart.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../../src/util/paths.ts";
import { buildSyntheticModel } from "../fixtures/synthetic-model.ts";
import { writeTrainingRun } from "../fixtures/training-run.ts";
import { type ServerProcess, startServerProcess } from "./server-process.ts";

const KEY = "e2e-training-run-key-0123456789";
const STEPS = [50, 100, 150];

interface Listing {
  data: { id: string; step: number; metrics: Record<string, number> }[];
}

describe("import a training run, evaluate every checkpoint, list the metrics", () => {
  let root: string;
  let models: string;
  let server: ServerProcess | undefined;
  /** Runs an ortserve command; a failure carries its exit status and stderr. */
  const cli = (...args: string[]): string => {
    try {
      return execFileSync(process.execPath, [join(repoRoot, "src/cli/main.ts"), ...args], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
        maxBuffer: 64 << 20,
      });
    } catch (err) {
      const e = err as { status?: number; signal?: string; stderr?: string; stdout?: string };
      throw new Error(
        `ortserve ${args[0]} failed (status ${e.status}, signal ${e.signal}):\n${e.stderr}\n${e.stdout}`,
      );
    }
  };

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "ortserve-e2e-run-"));
    models = join(root, "models");
    mkdirSync(models);
    const { modelDir } = await buildSyntheticModel(models, ["fp32"], "tiny");
    writeTrainingRun(join(root, "run"), root, modelDir, STEPS);
    writeFileSync(
      join(root, "set.jsonl"),
      [
        { prompt: "the cat", answer: "the" },
        { prompt: "the", choices: ["he", "at", "in"], answer: 1 },
        { messages: [{ role: "user", content: "hi" }], choices: ["a", "the"], answer: "the" },
        { prompt: "pick", schema: { enum: ["a", "b"] } },
      ]
        .map((x) => JSON.stringify(x))
        .join("\n"),
    );
  });

  afterAll(async () => {
    await server?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it("runs the three commands and shows the metrics through the openai client", async () => {
    const imported = cli(
      "checkpoint",
      "import",
      join(root, "run"),
      "--model",
      "tiny",
      "--models-dir",
      models,
    );
    expect(imported).toContain("imported 3 checkpoint(s), 0 already present");
    const evaluated = cli(
      "eval",
      "--model",
      "tiny",
      "--data",
      join(root, "set.jsonl"),
      "--out",
      join(root, "report"),
      "--constrained",
      "--max-tokens",
      "6",
      "--models-dir",
      models,
    );
    for (const step of STEPS) expect(evaluated).toContain(`| ${step} | tiny:step${step} | 4 |`);
    expect(readFileSync(join(root, "report", "metrics.svg"), "utf8")).toMatch(/^<svg[\s\S]*exact_match/);
    expect(existsSync(join(root, "report", "report.md"))).toBe(true);

    server = await startServerProcess({ modelsDir: models, dbPath: join(root, "ortserve.db"), apiKey: KEY });
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
    const listing = (await client.get("/preview/models/tiny/checkpoints")) as Listing;
    expect(listing.data.map((c) => c.step)).toEqual(STEPS);
    for (const c of listing.data) {
      expect(Object.keys(c.metrics)).toEqual(
        expect.arrayContaining(["loss", "learning_rate", "epoch", "set/exact_match", "set/mc_accuracy"]),
      );
      expect(c.metrics["set/mc_accuracy"]).toBeGreaterThanOrEqual(0);
      expect(c.metrics["set/mc_accuracy"]).toBeLessThanOrEqual(1);
      // The schema is enforced (--constrained): even a random model's output validates.
      expect(c.metrics["set/json_valid"]).toBe(1);
    }
    expect(listing.data[0]!.metrics.eval_loss).toBe(2.75);
    // The imported checkpoints serve.
    const r = await client.completions.create({ model: "tiny:step100", prompt: "the", max_tokens: 3 });
    // A random tiny model may sample special tokens (no text) or end at once: count tokens instead.
    expect(r.model).toBe("tiny:step100");
    expect(r.usage?.prompt_tokens).toBeGreaterThan(0);
    expect(r.choices).toHaveLength(1);
  });
});
