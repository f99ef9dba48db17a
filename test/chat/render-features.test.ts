import { describe, expect, it } from "vitest";
import { type ChatTemplateSource, type RenderChatOptions, renderChat } from "../../src/chat/index.ts";
import { ApiError } from "../../src/errors.ts";

function render(source: ChatTemplateSource, partial: Partial<RenderChatOptions> = {}): string {
  return renderChat(source, {
    messages: [{ role: "user", content: "Hi" }],
    addGenerationPrompt: true,
    continueFinalMessage: false,
    ...partial,
  }).text;
}

function apiError(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected an ApiError");
}

const TOOLS_AND_DOCS = [
  "{% if tools %}TOOLS:{% for t in tools %} {{ t.function.name }}({{ t.function.parameters.required | join(',') }}){% endfor %}{{ '\\n' }}{% endif %}",
  "{% if documents %}DOCS:{% for d in documents %} [{{ d.title }}: {{ d.text }}]{% endfor %}{{ '\\n' }}{% endif %}",
  "{% for m in messages %}{{ m.role }}: {{ m.content }}{{ '\\n' }}{% endfor %}",
].join("");

describe("template context", () => {
  it("passes tools and documents to the template", () => {
    const text = render(
      { chatTemplate: TOOLS_AND_DOCS },
      {
        tools: [
          {
            type: "function",
            function: { name: "get_weather", parameters: { type: "object", required: ["city", "unit"] } },
          },
        ],
        documents: [{ title: "Doc A", text: "alpha" }],
      },
    );
    expect(text).toBe("TOOLS: get_weather(city,unit)\nDOCS: [Doc A: alpha]\nuser: Hi\n");
  });

  it("gives tools and documents as none when absent", () => {
    const text = render({ chatTemplate: "{{ tools is none }} {{ documents is none }}" });
    expect(text).toBe("true true");
  });

  it("passes the special tokens, overridable by chat_template_kwargs", () => {
    const source = {
      chatTemplate: "{{ bos_token }}|{{ eos_token }}|{{ pad_token }}",
      bosToken: "<s>",
      eosToken: "</s>",
      specialTokens: { pad_token: "<pad>" },
    };
    expect(render(source)).toBe("<s>|</s>|<pad>");
    expect(render(source, { chatTemplateKwargs: { bos_token: "[B]" } })).toBe("[B]|</s>|<pad>");
  });

  it("hands chat_template_kwargs to the template", () => {
    const source = { chatTemplate: "{% if enable_thinking is false %}no-think {% endif %}{{ custom }}" };
    expect(render(source, { chatTemplateKwargs: { enable_thinking: false, custom: "x" } })).toBe(
      "no-think x",
    );
  });

  it("never lets chat_template_kwargs replace messages, tools or the template", () => {
    const source = { chatTemplate: "{{ messages[0].content }}" };
    for (const key of ["messages", "tools", "chat_template", "tokenize"]) {
      const err = apiError(() =>
        render(source, { chatTemplateKwargs: { [key]: [{ role: "user", content: "evil" }] } }),
      );
      expect(err.status).toBe(400);
      expect(err.param).toBe("chat_template_kwargs");
    }
  });

  it("lets the request's add_generation_prompt and documents win over chat_template_kwargs", () => {
    const source = { chatTemplate: "{{ add_generation_prompt }} {{ documents[0].text }}" };
    const text = render(source, {
      chatTemplateKwargs: { add_generation_prompt: false, documents: [{ text: "from-kwargs" }] },
      documents: [{ title: "t", text: "from-request" }],
    });
    expect(text).toBe("true from-request");
    // Unset request fields leave the kwargs' values in place.
    expect(render(source, { chatTemplateKwargs: { documents: [{ text: "from-kwargs" }] } })).toBe(
      "true from-kwargs",
    );
  });

  it("passes reasoning_effort, and switches enable_thinking on unless the kwargs set it", () => {
    const source = { chatTemplate: "{{ reasoning_effort }} {{ enable_thinking }}" };
    expect(render(source, { reasoningEffort: "high" })).toBe("high true");
    expect(render(source, { reasoningEffort: "low", chatTemplateKwargs: { enable_thinking: false } })).toBe(
      "low false",
    );
    expect(render(source, { chatTemplateKwargs: { reasoning_effort: "medium" } })).toBe("medium ");
  });

  it("provides strftime_now and range", () => {
    const text = render({ chatTemplate: "{{ strftime_now('%Y') }} {{ range(3) | join(',') }}" });
    expect(text).toBe(`${new Date().getFullYear()} 0,1,2`);
  });
});

describe("messages as the template sees them", () => {
  it("parses tool-call arguments into objects and keeps tool results", () => {
    const source = {
      chatTemplate:
        "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}call {{ c.function.name }} city={{ c.function.arguments.city }} [{{ c.function.arguments is mapping }}]\n{% endfor %}{% elif m.role == 'tool' %}result {{ m.tool_call_id }}: {{ m.content }}\n{% else %}{{ m.role }}: {{ m.content }}\n{% endif %}{% endfor %}",
    };
    const text = render(source, {
      messages: [
        { role: "user", content: "Weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "w", arguments: '{"city":"Oslo"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: [{ type: "text", text: "cold" }] },
      ],
    });
    expect(text).toBe("user: Weather?\ncall w city=Oslo [true]\nresult call_1: cold\n");
  });

  it("turns unparsable arguments into an empty object and drops an empty tool_calls list", () => {
    const source = {
      chatTemplate:
        "{% for m in messages %}{{ m.tool_calls is defined }}{% if m.tool_calls %}:{{ m.tool_calls[0].function.arguments | length }}{% endif %};{% endfor %}",
    };
    const bad = { id: "c", type: "function" as const, function: { name: "f", arguments: "{not json" } };
    const text = render(source, {
      messages: [
        { role: "assistant", content: "", tool_calls: [bad] },
        { role: "assistant", content: "", tool_calls: [] },
      ],
    });
    expect(text).toBe("true:0;false;");
  });

  it("passes reasoning and name through", () => {
    const source = {
      chatTemplate:
        "{% for m in messages %}{{ m.name }}/{{ m.reasoning }}/{{ m.reasoning_content }}{% endfor %}",
    };
    const text = render(source, {
      messages: [{ role: "assistant", name: "bot", content: "a", reasoning: "because" }],
    });
    expect(text).toBe("bot/because/because");
  });

  it("keeps content as parts when the template loops over message content", () => {
    const source = {
      chatTemplate:
        "{% for message in messages %}{{ message.role }}:{% for part in message['content'] %}[{{ part.type }}={{ part.text }}]{% endfor %}|{% endfor %}",
    };
    const text = render(source, {
      messages: [
        { role: "system", content: "plain" },
        {
          role: "user",
          content: [
            { type: "text", text: "a" },
            { type: "text", text: "b" },
          ],
        },
      ],
    });
    expect(text).toBe("system:[text=plain]|user:[text=a][text=b]|");
  });

  it("detects parts loops over sliced or renamed message lists", () => {
    const source = {
      chatTemplate:
        "{% set loop_messages = messages[1:] %}{% for msg in loop_messages %}{% for c in msg.content | reverse %}{{ c.text }}{% endfor %}{% endfor %}",
    };
    const text = render(source, {
      messages: [
        { role: "system", content: "s" },
        {
          role: "user",
          content: [
            { type: "text", text: "1" },
            { type: "text", text: "2" },
          ],
        },
      ],
    });
    expect(text).toBe("21");
  });

  it("continue_final_message with the parts format continues the last text part", () => {
    const source = {
      chatTemplate:
        "{% for m in messages %}<{{ m.role }}>{% for p in m.content %}{{ p.text }}{% endfor %}</{{ m.role }}>{% endfor %}",
    };
    const text = renderChat(source, {
      messages: [
        { role: "user", content: "Q" },
        { role: "assistant", content: [{ type: "text", text: "The answer is" }] },
      ],
      addGenerationPrompt: false,
      continueFinalMessage: true,
    }).text;
    expect(text).toBe("<user>Q</user><assistant>The answer is");
  });

  it("rejects non-text content parts", () => {
    const err = apiError(() =>
      render(
        { chatTemplate: "x" },
        { messages: [{ role: "user", content: [{ type: "image_url", image_url: {} }] }] },
      ),
    );
    expect(err.status).toBe(400);
    expect(err.param).toBe("messages");
  });
});

describe("errors", () => {
  it("a template's raise_exception is a 400 about the messages", () => {
    const source = {
      chatTemplate:
        "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user message') }}{% endif %}ok",
    };
    const err = apiError(() => render(source, { messages: [{ role: "assistant", content: "x" }] }));
    expect(err.status).toBe(400);
    expect(err.param).toBe("messages");
    expect(err.message).toBe("Conversations must start with a user message");
    expect(render(source)).toBe("ok");
  });

  it("a template that fails to parse or render is a 400 naming chat_template", () => {
    for (const chatTemplate of ["{% for m in %}", "{{ messages | no_such_filter }}"]) {
      const err = apiError(() => render({}, { chatTemplate }));
      expect(err.status).toBe(400);
      expect(err.param).toBe("chat_template");
    }
  });

  it("a model without a template needs one in the request", () => {
    const err = apiError(() => render({}));
    expect(err.status).toBe(400);
    expect(err.param).toBe("chat_template");
    expect(render({}, { chatTemplate: "{{ messages[0].content }}" })).toBe("Hi");
  });

  it("continue_final_message with add_generation_prompt is a 400", () => {
    const err = apiError(() => render({ chatTemplate: "x" }, { continueFinalMessage: true }));
    expect(err.status).toBe(400);
    expect(err.param).toBe("continue_final_message");
  });

  it("continue_final_message fails when the template drops the final message", () => {
    const err = apiError(() =>
      render(
        { chatTemplate: "{{ messages | length }}" },
        { addGenerationPrompt: false, continueFinalMessage: true },
      ),
    );
    expect(err.status).toBe(400);
  });

  it("documents must be objects", () => {
    const err = apiError(() =>
      render({ chatTemplate: "x" }, { documents: ["text"] as unknown as Record<string, unknown>[] }),
    );
    expect(err.param).toBe("documents");
  });
});

describe("named templates", () => {
  const source = {
    chatTemplate: {
      default: "default:{{ messages[0].content }}",
      tool_use: "tool_use:{{ tools | length if tools is not none else 'none' }}",
    },
  };

  it("uses tool_use when tools are given and default otherwise", () => {
    expect(render(source)).toBe("default:Hi");
    expect(render(source, { tools: [{ type: "function", function: { name: "f" } }] })).toBe("tool_use:1");
  });

  it("takes a request template by name or as text", () => {
    expect(render(source, { chatTemplate: "tool_use" })).toBe("tool_use:none");
    expect(render(source, { chatTemplate: "literal {{ messages | length }}" })).toBe("literal 1");
  });

  it("falls back to default when tools are given but there is no tool_use template", () => {
    expect(render({ chatTemplate: { default: "d" } }, { tools: [] })).toBe("d");
  });

  it("without a default the request must pick one", () => {
    const err = apiError(() => render({ chatTemplate: { rag: "r", tool_use: "t" } }));
    expect(err.param).toBe("chat_template");
    expect(render({ chatTemplate: { rag: "r", tool_use: "t" } }, { chatTemplate: "rag" })).toBe("r");
  });
});
