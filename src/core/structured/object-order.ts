/**
 * Objects whose properties may come in any order. XGrammar generates an object's declared
 * properties in their declared order only (and extra ones after them), so a valid object written
 * in another order is masked out. Here such an object is a rule of ortserve's own: any sequence of
 * declared or extra properties, each value by its own schema's rule (taken from XGrammar's grammar
 * through marker consts, extra-names.ts unmark), ending only once every required name was seen
 * (the rules count the subsets of required names: 2^r of them, so only up to MAX_REQUIRED).
 * A name may come again; each of its values satisfies its schema, so the object JSON.parse keeps
 * (the last) does too. Counts of properties are not kept, so objects with min/maxProperties stay
 * in XGrammar's form.
 */
import { extraNameRules, ruleUses, spliceError, unmark } from "./extra-names.ts";

/** Marks, as a const string, an any-order object and its values (followed by its index). */
export const OBJECT_SLOT = "ortserve-object-";
/** Required names tracked (2^r rules each way). */
export const MAX_REQUIRED = 5;
/** Names written as they are inside an EBNF string and a JSON key (no escapes). */
const PLAIN = /^[\x20-\x21\x23-\x5b\x5d-\x7e]*$/;

export interface ObjectSlot {
  names: string[];
  required: string[];
  /** Extra properties allowed (their key never a declared name). */
  open: boolean;
}

/**
 * Keywords beside which the object's rule is not its properties alone (the any-order rule would
 * drop them): values, combinators, counts, names and dependencies.
 */
const KEEP = [
  "enum",
  "const",
  "anyOf",
  "allOf",
  "oneOf",
  "not",
  "$ref",
  "$dynamicRef",
  "$recursiveRef",
  "if",
  "then",
  "else",
  "minProperties",
  "maxProperties",
  "patternProperties",
  "propertyNames",
  "dependentSchemas",
  "dependentRequired",
  "dependencies",
  "unevaluatedProperties",
];

/**
 * The slot of an object schema that can be an any-order object: of type object alone (another
 * type beside it would be dropped), without the KEEP keywords, with plain names, and open or
 * with a property that is not required.
 */
export function anyOrderSlot(o: Record<string, unknown>): ObjectSlot | undefined {
  const type = Array.isArray(o.type) && o.type.length === 1 ? o.type[0] : o.type;
  // Without a type, the backend reads declared properties as an object's (a narrowing already).
  if ((type !== "object" && type !== undefined) || KEEP.some((k) => k in o)) return undefined;
  const props = o.properties;
  if (typeof props !== "object" || props === null || Array.isArray(props)) return undefined;
  const names = Object.keys(props);
  const open = "additionalProperties" in o && o.additionalProperties !== false;
  if (!("additionalProperties" in o) || names.length + (open ? 1 : 0) < 2) return undefined;
  const required = Array.isArray(o.required) ? [...new Set(o.required as string[])] : [];
  // Closed with every property required (OpenAI's strict shape): the schema fixes what the object
  // holds, so declared order (what OpenAI's strict mode writes) narrows only the order, and lets
  // the keys be forced (jump-forward).
  if (!open && names.every((n) => required.includes(n))) return undefined;
  if (required.length > MAX_REQUIRED) return undefined;
  if (!names.every((n) => PLAIN.test(n)) || !required.every((r) => names.includes(r))) return undefined;
  return { names, required, open };
}

export const propertyMarker = (j: number, i: number) => `${OBJECT_SLOT}${j}-property-${i}`;
export const extraMarker = (j: number) => `${OBJECT_SLOT}${j}-extra`;

/** XGrammar's grammar with slot j's object (when the grammar holds it) as an any-order rule. */
export function spliceAnyOrder(ebnf: string, j: number, slot: ObjectSlot, anyWhitespace: boolean): string {
  const object = unmark(ebnf, `${OBJECT_SLOT}${j}`);
  if (!object) return ebnf;
  let text = object.ebnf;
  const values = slot.names.map((_, i) => {
    const v = unmark(text, propertyMarker(j, i));
    if (!v) throw spliceError(`property ${i} of object ${j}`);
    text = v.ebnf;
    return v.rule;
  });
  let extra: string | undefined;
  if (slot.open) {
    const v = unmark(text, extraMarker(j));
    if (!v) throw spliceError(`extra properties of object ${j}`);
    text = v.ebnf;
    extra = v.rule;
  }
  const name = `ortserve_object_${j}`;
  const lines = text.split("\n");
  const at = lines.findIndex((l) => l.startsWith(`${object.rule} ::= `));
  if (at < 0 || ruleUses(text, name) > 0) throw spliceError(`object ${j}`);
  lines[at] = `${object.rule} ::= ((${name}))`;
  return `${lines.join("\n")}\n${anyOrderRules(name, slot, values, extra, anyWhitespace).join("\n")}`;
}

/**
 * The rules of an any-order object entered by `name`: `{`, then properties separated by commas,
 * `}` once every required name came (item_M and tail_M: M the set of required names seen).
 */
function anyOrderRules(
  name: string,
  slot: ObjectSlot,
  values: string[],
  extra: string | undefined,
  anyWhitespace: boolean,
): string[] {
  const ws = anyWhitespace ? " [ \\n\\t]* " : " ";
  const full = (1 << slot.required.length) - 1;
  const bit = (n: string) => {
    const r = slot.required.indexOf(n);
    return r < 0 ? 0 : 1 << r;
  };
  const key = `${name}_key`;
  const rules = [
    `${name} ::= ${full === 0 ? `"{"${ws}"}" | ` : ""}"{"${ws}${name}_item_0`,
    ...(extra ? extraNameRules(key, slot.names) : []),
  ];
  for (let m = 0; m <= full; m++) {
    const alts = slot.names.map((n, i) => `"\\"${n}\\""${ws}":"${ws}${values[i]} ${name}_tail_${m | bit(n)}`);
    if (extra) alts.push(`${key}${ws}":"${ws}${extra} ${name}_tail_${m}`);
    rules.push(`${name}_item_${m} ::= ${alts.join(" | ")}`);
    const tail = [`${ws.trim() ? `[ \\n\\t]* ` : ""}"," ${ws.trim() ? "[ \\n\\t]* " : ""}${name}_item_${m}`];
    if (m === full) tail.unshift(`${ws.trim() ? "[ \\n\\t]* " : ""}"}"`);
    rules.push(`${name}_tail_${m} ::= ${tail.join(" | ")}`);
  }
  return rules;
}
