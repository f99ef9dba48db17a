/**
 * A schema whose `enum` or `const` sits beside other assertions (`not`, bounds, patterns...)
 * has finitely many instances: they are found at compile time by validating each listed value
 * against the whole schema (Ajv, 2020-12), and the schema becomes the `enum` of those. The backend
 * then enforces a plain enum token by token; nothing is checked after generation.
 *
 * Only done where Ajv's 2020-12 reading is the schema's own: a document with keywords whose
 * meaning changed between drafts, or with nested ids (other base URIs), is left as it is.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

type Schema = Record<string, unknown>;
const isSchema = (s: unknown): s is Schema => typeof s === "object" && s !== null && !Array.isArray(s);

/** Keywords that do not change what is valid. */
const ANNOTATIONS = new Set([
  "title",
  "description",
  "default",
  "examples",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
]);
/** Keys whose values are data, not subschemas. */
const DATA = new Set(["enum", "const", "default", "examples"]);
/** Keywords read differently by earlier drafts (or naming other bases). */
const DRAFT_SPECIFIC = new Set([
  "dependencies",
  "additionalItems",
  "$recursiveRef",
  "$recursiveAnchor",
  "id",
  "$id",
]);

const ROOT = "urn:ortserve:schema";

/** The schema with enum/const nodes reduced to their valid values (the input is not changed). */
export function filterEnums(root: unknown): unknown {
  if (!isSchema(root) || !hasEnumWithAssertions(root) || !draftNeutral(root)) return root;
  const { $id, $schema, ...body } = root;
  let ajv: InstanceType<typeof Ajv2020>;
  try {
    ajv = new Ajv2020({ strict: false, validateSchema: false, logger: false, allErrors: false });
    addFormats.default(ajv);
    ajv.addSchema(body, ROOT);
  } catch {
    return root;
  }
  const visit = (node: unknown, pointer: string): unknown => {
    if (Array.isArray(node)) return node.map((x, i) => visit(x, `${pointer}/${i}`));
    if (!isSchema(node)) return node;
    const values = finiteValues(node);
    if (values && enumWithAssertions(node)) {
      try {
        const validate = ajv.getSchema(`${ROOT}#${pointer}`);
        if (validate) {
          const kept = values.filter((v) => validate(v) === true);
          if (kept.length > 0) return { enum: kept };
        }
      } catch {
        // Left as written: the checker refuses what it cannot enforce.
      }
      return node;
    }
    const out: Schema = {};
    for (const [k, v] of Object.entries(node))
      out[k] = DATA.has(k) ? v : visit(v, `${pointer}/${k.replaceAll("~", "~0").replaceAll("/", "~1")}`);
    return out;
  };
  return { ...(visit(body, "") as Schema), ...($schema !== undefined ? { $schema } : {}) };
}

/** Values that include every instance of the schema: its own enum or const, or an allOf branch's. */
function finiteValues(s: Schema): unknown[] | undefined {
  if ("const" in s) return [s.const];
  if (Array.isArray(s.enum)) return s.enum;
  if (Array.isArray(s.allOf))
    for (const b of s.allOf)
      if (isSchema(b) && ("const" in b || Array.isArray(b.enum))) return finiteValues(b);
  return undefined;
}

function enumWithAssertions(s: Schema): boolean {
  if (!finiteValues(s)) return false;
  return Object.keys(s).some(
    (k) =>
      !["enum", "const", "type", "definitions"].includes(k) &&
      !ANNOTATIONS.has(k) &&
      (k === "$ref" || !k.startsWith("$")),
  );
}

function hasEnumWithAssertions(root: unknown): boolean {
  let found = false;
  const walk = (n: unknown): void => {
    if (found) return;
    if (Array.isArray(n)) n.forEach(walk);
    else if (isSchema(n)) {
      if (enumWithAssertions(n)) found = true;
      for (const [k, v] of Object.entries(n)) if (!DATA.has(k)) walk(v);
    }
  };
  walk(root);
  return found;
}

/** No keyword whose meaning depends on the draft, no nested base URI, no array-form items. */
function draftNeutral(root: Schema): boolean {
  let ok = true;
  const walk = (n: unknown, top: boolean): void => {
    if (!ok) return;
    if (Array.isArray(n)) for (const x of n) walk(x, false);
    else if (isSchema(n)) {
      for (const [k, v] of Object.entries(n)) {
        if (DATA.has(k)) continue;
        if (DRAFT_SPECIFIC.has(k) && !(top && k === "$id")) ok = false;
        if (k === "items" && Array.isArray(v)) ok = false;
        if ((k === "exclusiveMinimum" || k === "exclusiveMaximum") && typeof v === "boolean") ok = false;
        walk(v, false);
      }
    }
  };
  walk(root, true);
  return ok;
}
