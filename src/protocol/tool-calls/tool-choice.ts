/**
 * `tool_choice` beyond the spec's "none": its wire form, its checks against `tools`, and for
 * "required" and a named function the constraint that makes the model write a valid call in the
 * Hermes format (`<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`), enforced by the
 * structured-output backend like any other constraint. The tools' parameter schemas pass the same
 * fail-closed keyword check first; what it refuses is a 400 naming the tool and the keyword.
 */
import type { StructuredConstraint } from "../../core/structured/constraint-spec.ts";
import { checkJsonSchema, UnsupportedSchema } from "../../core/structured/schema-support.ts";
import { invalidRequest } from "../../errors.ts";
import type { Tool } from "../request-fields.ts";
import { isString, literal, object, required, string, union } from "../schema.ts";

export const TOOL_CHOICE_MODES = ["none", "auto", "required"] as const;

/** "none" | "auto" | "required" | {"type": "function", "function": {"name": ...}}. */
export const toolChoiceSchema = union<ToolChoice>(
  [
    { when: isString, schema: literal(TOOL_CHOICE_MODES) },
    {
      when: (v) => typeof v === "object" && v !== null && !Array.isArray(v),
      schema: object({
        type: required(literal(["function"])),
        function: required(object({ name: required(string()) })),
      }),
    },
  ],
  'one of "none", "auto", "required" or {"type": "function", "function": {"name": ...}}',
);

export type ToolChoice =
  | (typeof TOOL_CHOICE_MODES)[number]
  | { type: "function"; function: { name: string } };

/** The Hermes format's markers; the parser (hermes.ts) reads what this constraint writes. */
export const TOOL_CALL_BEGIN = "<tool_call>";
export const TOOL_CALL_END = "</tool_call>";

/** Rules across tool_choice, tools and parallel_tool_calls. */
export function checkToolChoice(choice: ToolChoice, tools: Tool[] | undefined): void {
  if (choice === "none") return;
  if (!tools || tools.length === 0)
    throw invalidRequest(
      `tool_choice ${typeof choice === "string" ? `"${choice}"` : "naming a function"} needs tools.`,
      "tool_choice",
    );
  if (typeof choice === "object" && !tools.some((t) => t.function.name === choice.function.name))
    throw invalidRequest(
      `tool_choice names the function "${choice.function.name}", which is not one of tools.`,
      "tool_choice.function.name",
    );
}

/** The tools a forced call may use: the named one, or all for "required"; none otherwise. */
function forcedTools(choice: ToolChoice, tools: Tool[] | undefined): Tool[] {
  if (choice === "none" || choice === "auto" || !tools) return [];
  if (choice === "required") return tools;
  return tools.filter((t) => t.function.name === choice.function.name).slice(0, 1);
}

/** A function without parameters takes an empty object (as OpenAI reads an omitted schema). */
function parametersOf(tool: Tool): Record<string, unknown> {
  return tool.function.parameters ?? { type: "object", properties: {}, additionalProperties: false };
}

/**
 * The constraint for "required" (one call of any tool, or several when parallel calls are
 * allowed) and for a named function (one call of it); undefined for "none" and "auto". The name is
 * written by the tag's fixed beginning, so each parameter schema stays a schema root ($ref works).
 */
export function toolCallConstraint(
  choice: ToolChoice,
  tools: Tool[] | undefined,
  parallel: boolean,
): StructuredConstraint | undefined {
  const forced = forcedTools(choice, tools);
  if (forced.length === 0) return undefined;
  const tags = forced.map((tool) => {
    const parameters = parametersOf(tool);
    // A call's arguments are an object: a schema that allows anything else could force output
    // the parser would not read as a call.
    if (parameters.type !== "object") {
      const index = tools!.indexOf(tool);
      throw invalidRequest(
        `tools[${index}] ("${tool.function.name}"): a forced call needs parameters with "type": "object".`,
        `tools[${index}].function.parameters`,
      );
    }
    try {
      checkJsonSchema(parameters);
    } catch (err) {
      if (err instanceof UnsupportedSchema) {
        const index = tools!.indexOf(tool);
        throw invalidRequest(
          `tools[${index}] ("${tool.function.name}"): its parameters are not supported: ${err.message}`,
          `tools[${index}].function.parameters`,
        );
      }
      throw err;
    }
    return {
      type: "tag",
      begin: `${TOOL_CALL_BEGIN}\n{"name": ${JSON.stringify(tool.function.name)}, "arguments": `,
      content: { type: "json_schema", json_schema: parameters },
      end: `}\n${TOOL_CALL_END}`,
    };
  });
  const single = typeof choice === "object" || !parallel;
  const format = {
    type: "tags_with_separator",
    tags,
    separator: "\n",
    at_least_one: true,
    stop_after_first: single,
  };
  return { kind: "structural_tag", structuralTag: JSON.stringify({ type: "structural_tag", format }) };
}
