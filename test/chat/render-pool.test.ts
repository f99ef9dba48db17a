/**
 * The template pool renders in real worker threads: the same text as renderChat, template errors
 * as 400s, and renders that overrun their time or output budget end with a 400 naming the budget
 * while their thread is replaced.
 */
import { afterAll, describe, expect, it } from "vitest";
import {
  type ChatTemplateSource,
  type RenderChatOptions,
  renderChat,
  TemplatePool,
} from "../../src/chat/index.ts";
import { ApiError } from "../../src/errors.ts";

const TEMPLATE =
  "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
const source: ChatTemplateSource = { chatTemplate: TEMPLATE, bosToken: "<s>" };
const options = (over: Partial<RenderChatOptions> = {}): RenderChatOptions => ({
  messages: [{ role: "user", content: "hi" }],
  addGenerationPrompt: true,
  continueFinalMessage: false,
  ...over,
});

// CPU-bound without end, in little memory: it always meets the time budget first.
const LOOP = "{% for i in range(999999) %}{% for j in range(1000) %}{% endfor %}{% endfor %}";

const pool = new TemplatePool({ workers: 1, timeoutMs: 300, maxOutputChars: 1000 });
afterAll(() => pool.close());

async function failure(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

describe("TemplatePool", () => {
  it("renders what renderChat renders", async () => {
    const expected = renderChat(source, options()).text;
    expect(expected).toBe("<user>hi\n<assistant>");
    expect((await pool.render(source, options())).text).toBe(expected);
    const continued = options({
      addGenerationPrompt: false,
      continueFinalMessage: true,
      messages: [{ role: "assistant", content: "Once upon" }],
    });
    expect((await pool.render(source, continued)).text).toBe(renderChat(source, continued).text);
  });

  it("reports a template's own errors as the same 400s", async () => {
    const raised = await failure(
      pool.render(source, options({ chatTemplate: "{{ raise_exception('no system role') }}" })),
    );
    expect(raised).toMatchObject({ status: 400, param: "messages", message: "no system role" });
    const unparsable = await failure(pool.render(source, options({ chatTemplate: "{% for m in %}" })));
    expect(unparsable).toMatchObject({ status: 400, param: "chat_template" });
    const badKwargs = await failure(pool.render(source, options({ chatTemplateKwargs: { tokenize: true } })));
    expect(badKwargs).toMatchObject({ status: 400, param: "chat_template_kwargs" });
  });

  it("ends a render that overruns its time budget, replaces the thread and keeps serving", async () => {
    const before = { ...pool.counts };
    const err = await failure(pool.render(source, options({ chatTemplate: LOOP })));
    expect(err).toMatchObject({ status: 400, param: "chat_template", code: "template_timeout" });
    expect(err.message).toContain("300 ms");
    expect(pool.counts).toEqual({ ...before, timedOut: before.timedOut + 1 });
    expect((await pool.render(source, options())).text).toBe("<user>hi\n<assistant>");
    expect(pool.threads).toBe(1);
  });

  it("refuses output beyond the budget, and output that outgrows memory", async () => {
    const long = await failure(
      pool.render(source, options({ chatTemplate: "{% for i in range(2000) %}x{% endfor %}" })),
    );
    expect(long).toMatchObject({ status: 400, param: "chat_template", code: "template_output_too_large" });
    expect(long.message).toContain("1000 characters");
    // Doubling a string 40 times: the thread runs out of room long before the output check.
    const doubling =
      "{% set s = namespace(x='xxxxxxxx') %}{% for i in range(40) %}{% set s.x = s.x + s.x %}{% endfor %}{{ s.x|length }}";
    const huge = await failure(pool.render(source, options({ chatTemplate: doubling })));
    expect(huge).toMatchObject({ status: 400, param: "chat_template" });
    expect((await pool.render(source, options())).text).toBe("<user>hi\n<assistant>");
  });

  it("keeps a render thread's heap flat over many renders (each task's port is not retained)", async () => {
    const renders = 24_000;
    const own = new TemplatePool({ workers: 1 });
    try {
      await own.render(source, options());
      const [before] = await own.heapStatistics();
      for (let i = 0; i < renders; i += 32)
        await Promise.all(
          Array.from({ length: 32 }, (_, j) =>
            own.render(source, options({ messages: [{ role: "user", content: `question ${i + j}` }] })),
          ),
        );
      const [after] = await own.heapStatistics();
      // Retaining ~1.4 KB per task (piscina's synchronous wait) would add ~34 MB here.
      expect(after!.usedBytes - before!.usedBytes).toBeLessThan(8 << 20);
    } finally {
      await own.close();
    }
  });

  it("refuses budgets that are not positive integers", () => {
    expect(() => new TemplatePool({ timeoutMs: 0 })).toThrow(RangeError);
    expect(() => new TemplatePool({ workers: 1.5 })).toThrow(RangeError);
  });
});
