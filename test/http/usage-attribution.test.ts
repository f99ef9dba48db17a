/**
 * Usage attribution under concurrent load: three API keys send interleaved requests, streaming and
 * not, with different `<team>/<project>` headers or a project id alone (the official client's
 * `project` option, which sends OpenAI-Project, or Compat-Project) or none, all in flight together. Each usage row, found by
 * its request id, names the key and project of the request that made it.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addSyntheticModel, type Harness, startHarness } from "./harness.ts";

let h: Harness;

beforeAll(async () => {
  h = await startHarness((modelsDir) => addSyntheticModel(modelsDir, "tiny").then(() => undefined), {
    maxNumSeqs: 8,
  });
});
afterAll(() => h?.dispose());

interface Sent {
  requestId: string;
  keyId: number;
  team: string | null;
  project: string | null;
}

describe("usage attribution under concurrent load", () => {
  it("records each request's key and project, whatever runs beside it", async () => {
    const keys = [0, 1, 2].map((i) => h.server.storage.keys.createKey(`attribution-${i}`));
    const projects = [null, "red/alpha", "red/beta", "blue/alpha", "proj_abc123"];
    const sent: Sent[] = [];
    const runs: Promise<unknown>[] = [];
    for (let i = 0; i < 36; i++) {
      const key = keys[i % 3]!;
      const header = projects[(i * 7) % projects.length]!;
      // A project id alone is OpenAI-Project's form only (Compat-Project is always <team>/<project>).
      const viaSdkOption = i % 2 === 0 || !header?.includes("/");
      const client = new OpenAI({
        apiKey: key.key,
        baseURL: `${h.url}/v1`,
        maxRetries: 0,
        ...(header && viaSdkOption ? { project: header } : {}),
        ...(header && !viaSdkOption ? { defaultHeaders: { "Compat-Project": header } } : {}),
      });
      const requestId = `attr-${i}`;
      const [team, project] = !header
        ? [null, null]
        : header.includes("/")
          ? header.split("/")
          : [null, header];
      sent.push({ requestId, keyId: key.id, team: team!, project: project! });
      const body = {
        model: "tiny",
        messages: [{ role: "user" as const, content: `request ${i}` }],
        max_tokens: 1 + (i % 5),
      };
      const options = { headers: { "X-Request-Id": requestId } };
      runs.push(
        i % 3 === 1
          ? client.chat.completions.create({ ...body, stream: true }, options).then(async (s) => {
              for await (const _ of s);
            })
          : client.chat.completions.create(body, options),
      );
    }
    await Promise.all(runs);

    const rows = h.server.storage.db
      .prepare("SELECT request_id, key_id, team, project, status FROM usage WHERE request_id LIKE 'attr-%'")
      .all() as {
      request_id: string;
      key_id: number;
      team: string | null;
      project: string | null;
      status: number;
    }[];
    expect(rows).toHaveLength(sent.length);
    const byId = new Map(rows.map((r) => [r.request_id, r]));
    for (const s of sent) {
      const row = byId.get(s.requestId);
      expect(row, s.requestId).toBeDefined();
      expect({ key: row!.key_id, team: row!.team, project: row!.project, status: row!.status }).toEqual({
        key: s.keyId,
        team: s.team,
        project: s.project,
        status: 200,
      });
    }
    // The mix covered every key and every project header.
    expect(new Set(rows.map((r) => r.key_id)).size).toBe(3);
    expect(new Set(rows.map((r) => `${r.team}/${r.project}`)).size).toBe(projects.length);
  });
});
