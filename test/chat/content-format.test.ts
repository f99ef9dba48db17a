import { Template } from "@huggingface/jinja";
import { describe, expect, it } from "vitest";
import { detectContentFormat } from "../../src/chat/content-format.ts";
import { SMOLLM2_TEMPLATE } from "./smollm2-template.ts";

function format(source: string): string {
  return detectContentFormat(new Template(source).parsed);
}

describe("detectContentFormat", () => {
  it("finds string templates", () => {
    expect(format(SMOLLM2_TEMPLATE)).toBe("string");
    // A loop over something else's content does not count.
    expect(
      format("{% for x in other.content %}{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}"),
    ).toBe("string");
  });

  it("finds loops over message content, however messages are reached", () => {
    expect(
      format("{% for m in messages %}{% for c in m['content'] %}{{ c.text }}{% endfor %}{% endfor %}"),
    ).toBe("openai");
    expect(
      format(
        "{% set rest = messages[1:] %}{% set alias = rest %}{% for m in alias|reverse %}{% if m.content is string %}{{ m.content }}{% else %}{% for c in m.content %}{% endfor %}{% endif %}{% endfor %}",
      ),
    ).toBe("openai");
    expect(
      format("{% for m in messages if m.role != 'system' %}{% for c in m.content %}{% endfor %}{% endfor %}"),
    ).toBe("openai");
  });
});
