/**
 * Structured-output fields → the engine's constraint. `structured_outputs` (vLLM) carries exactly
 * one constraint (json, regex, choice, grammar, json_object, structural_tag) and its options;
 * `response_format` (OpenAI) asks for json_object or a json_schema. At most one constraint per
 * request. Options that have no meaning for the constraint, or that the backend cannot honour,
 * are a 400 naming them, never ignored. The constraint's own content (schema keywords, regex
 * features, grammar syntax) is checked by the engine's backend (src/core/structured/).
 */
import type { RequestedConstraint } from "../core/structured/constraint-spec.ts";
import { invalidRequest, unsupportedField } from "../errors.ts";
import type { responseFormatSchema, structuredOutputsSchema } from "./request-fields.ts";
import type { Infer } from "./schema.ts";

type StructuredOutputs = Infer<typeof structuredOutputsSchema>;
type ResponseFormat = Infer<typeof responseFormatSchema>;

export const STRUCTURED_CONSTRAINTS = [
  "json",
  "regex",
  "choice",
  "grammar",
  "json_object",
  "structural_tag",
] as const;

/** The backends `_backend` may name: the one ortserve has, or "auto" (which picks it). */
export const STRUCTURED_BACKENDS = ["xgrammar", "auto"] as const;

export function structuredConstraint(
  so: StructuredOutputs | undefined,
  rf: ResponseFormat | undefined,
): RequestedConstraint | undefined {
  const fromFormat = responseFormatConstraint(rf);
  if (so === undefined) return fromFormat;
  const set = STRUCTURED_CONSTRAINTS.filter((k) => so[k] !== undefined);
  if (set.length !== 1)
    throw invalidRequest(
      `structured_outputs needs exactly one of ${STRUCTURED_CONSTRAINTS.join(", ")}; got ${set.length ? set.join(", ") : "none"}.`,
      "structured_outputs",
    );
  if (fromFormat)
    throw invalidRequest(
      `structured_outputs and response_format type "${rf!.type}" are two constraints; a request may carry at most one.`,
      "structured_outputs",
    );
  if (so._backend !== undefined && !(STRUCTURED_BACKENDS as readonly string[]).includes(so._backend))
    throw invalidRequest(
      `Unknown structured-output backend "${so._backend}"; this server has ${STRUCTURED_BACKENDS.map((b) => `"${b}"`).join(" and ")}.`,
      "structured_outputs._backend",
    );
  if (so.whitespace_pattern !== undefined)
    throw unsupportedField(
      "structured_outputs.whitespace_pattern",
      "the xgrammar backend takes no whitespace pattern; use disable_any_whitespace for compact JSON",
    );
  const kind = set[0]!;
  const isJson = kind === "json" || kind === "json_object";
  for (const option of ["disable_any_whitespace", "disable_additional_properties"] as const)
    if (so[option] && (!isJson || (option === "disable_additional_properties" && kind !== "json")))
      throw invalidRequest(
        `${option} applies to a json constraint, not to ${kind}.`,
        `structured_outputs.${option}`,
      );
  // Unset: the model's default decides (jsonWhitespace, when the engine request is built).
  const whitespace =
    so.disable_any_whitespace === undefined ? {} : { anyWhitespace: !so.disable_any_whitespace };
  switch (kind) {
    case "json": {
      const schema = typeof so.json === "string" ? parseSchemaText(so.json) : so.json;
      return {
        kind: "json_schema",
        schema: JSON.stringify(so.disable_additional_properties ? closeObjects(schema) : schema),
        ...whitespace,
      };
    }
    case "json_object":
      if (so.json_object !== true)
        throw invalidRequest("json_object must be true when given.", "structured_outputs.json_object");
      return { kind: "json_object", ...whitespace };
    case "regex":
      return { kind: "regex", pattern: so.regex! };
    case "choice":
      if (so.choice!.length === 0)
        throw invalidRequest("choice needs at least one string.", "structured_outputs.choice");
      return { kind: "choice", choices: so.choice! };
    case "grammar":
      return { kind: "grammar", grammar: so.grammar! };
    case "structural_tag":
      return { kind: "structural_tag", structuralTag: so.structural_tag! };
  }
}

/** response_format has no whitespace option: its JSON follows the model's default. */
function responseFormatConstraint(rf: ResponseFormat | undefined): RequestedConstraint | undefined {
  if (rf === undefined) return undefined;
  if (rf.type !== "json_schema" && rf.json_schema !== undefined)
    throw invalidRequest("json_schema is only used with type 'json_schema'.", "response_format.json_schema");
  if (rf.type === "text") return undefined;
  if (rf.type === "json_object") return { kind: "json_object" };
  if (rf.json_schema === undefined)
    throw invalidRequest(
      "When response_format type is 'json_schema', the 'json_schema' field must be provided.",
      "response_format.json_schema",
    );
  // The schema is enforced either way. strict is OpenAI's closed reading: an object that leaves
  // additionalProperties unset is closed (OpenAI's strict mode wants it false everywhere); without
  // strict, unset means open, as in JSON Schema.
  const schema = rf.json_schema.schema ?? {};
  return {
    kind: "json_schema",
    schema: JSON.stringify(rf.json_schema.strict ? closeObjects(schema) : schema),
  };
}

function parseSchemaText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw invalidRequest(`json is not valid JSON: ${(err as Error).message}`, "structured_outputs.json");
  }
}

const SCHEMA_MAPS = ["properties", "$defs", "definitions"];
const SCHEMA_LISTS = ["anyOf", "allOf", "oneOf", "prefixItems"];
const SCHEMA_VALUES = ["items", "additionalProperties", "not"];

/**
 * disable_additional_properties, and response_format's strict: every object schema that does not
 * say otherwise is closed.
 */
function closeObjects(schema: unknown): unknown {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return schema;
  const out: Record<string, unknown> = { ...schema };
  for (const k of SCHEMA_MAPS)
    if (typeof out[k] === "object" && out[k] !== null)
      out[k] = Object.fromEntries(Object.entries(out[k]).map(([name, s]) => [name, closeObjects(s)]));
  for (const k of SCHEMA_LISTS) if (Array.isArray(out[k])) out[k] = (out[k] as unknown[]).map(closeObjects);
  for (const k of SCHEMA_VALUES) if (k in out) out[k] = closeObjects(out[k]);
  const isObject = out.type === "object" || (Array.isArray(out.type) && out.type.includes("object"));
  if ((isObject || "properties" in out) && !("additionalProperties" in out)) out.additionalProperties = false;
  return out;
}
