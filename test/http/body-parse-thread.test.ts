import { getPriority } from "node:os";
import { afterAll, describe, expect, it } from "vitest";
import { BodyParseThread } from "../../src/http/body-parse-thread.ts";
import { MAX_JSON_DEPTH, parseJsonText } from "../../src/http/parse-json.ts";
import { PREPARATION_NICE } from "../../src/util/thread-priority.ts";

describe("body parser thread", () => {
  const thread = new BodyParseThread();
  afterAll(() => thread.close());

  it("gives what the main thread's parse gives, refusals included", async () => {
    const texts = [
      JSON.stringify({ model: "m", messages: [{ role: "user", content: "é\u2028".repeat(40_000) }] }),
      '{"a":1,}',
      `{"k":${"[".repeat(MAX_JSON_DEPTH + 1)}${"]".repeat(MAX_JSON_DEPTH + 1)}}`,
      "",
    ];
    for (const text of texts) expect(await thread.parse(text)).toEqual(parseJsonText(text));
    expect(await thread.parse(texts[2]!)).toMatchObject({
      refused: { code: "nesting_too_deep", param: "k" },
    });
  });

  it.runIf(process.platform === "linux")(
    "runs at the preparation priority; the calling thread keeps its own",
    async () => {
      const before = getPriority(process.pid);
      expect(await thread.nice()).toBe(Math.max(before, PREPARATION_NICE));
      expect(getPriority(process.pid)).toBe(before);
    },
  );
});
