/**
 * Fail closed, before anything is compiled: a constraint's JSON Schema keywords and regex features
 * must all be ones the backend enforces (schema-support.ts, regex-support.ts), or the request is
 * refused with a RequestError naming the feature. The protocol layer runs this too, so a refusal
 * is a 400 before the request reaches a worker.
 */
import { RequestError } from "../request-error.ts";
import { constraintField, type StructuredConstraint } from "./constraint-spec.ts";
import { unsupportedRegexFeature } from "./regex-support.ts";
import { checkJsonSchema, UnsupportedSchema } from "./schema-support.ts";

export function refused(c: StructuredConstraint, why: string): RequestError {
  const field = constraintField(c);
  return new RequestError("invalid_request", `${field}: ${why}`, field);
}

/** The fail-closed checks of the constraint's own text (no backend involved). */
export function checkSupported(c: StructuredConstraint): void {
  try {
    if (c.kind === "json_schema") checkJsonSchema(parseJson(c.schema, "the schema"), { splicedRules: true });
    else if (c.kind === "regex") {
      const problem = unsupportedRegexFeature(c.pattern);
      if (problem) throw refused(c, `not supported: ${problem}`);
    } else if (c.kind === "choice") {
      if (c.choices.length === 0) throw refused(c, "needs at least one string");
    } else if (c.kind === "structural_tag")
      checkStructuralTag(parseJson(c.structuralTag, "the structural tag"));
  } catch (err) {
    if (err instanceof UnsupportedSchema) throw refused(c, `not supported: ${err.message}`);
    throw err;
  }
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UnsupportedSchema("", `${what} is not valid JSON (${(err as Error).message})`);
  }
}

/** Every schema and regex inside a structural tag passes the same checks. */
function checkStructuralTag(tag: unknown): void {
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) {
      for (const x of v) visit(x);
      return;
    }
    if (typeof v !== "object" || v === null) return;
    const o = v as Record<string, unknown>;
    if (o.type === "json_schema" || o.type === "qwen_xml_parameter") checkJsonSchema(o.json_schema);
    if (o.type === "regex") {
      const problem = unsupportedRegexFeature(String(o.pattern));
      if (problem) throw new UnsupportedSchema("", `regex with ${problem}`);
    }
    // The legacy form: structures of {begin, schema, end}.
    if ("begin" in o && "schema" in o)
      checkJsonSchema(typeof o.schema === "string" ? parseJson(o.schema, "a structure's schema") : o.schema);
    for (const [k, x] of Object.entries(o)) if (k !== "json_schema" && k !== "schema") visit(x);
  };
  visit(tag);
}
