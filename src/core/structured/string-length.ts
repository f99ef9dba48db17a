/**
 * Length-bounded strings as grammar rules of ortserve's own, shared by every string of the schema.
 * XGrammar computes a token mask for every position of its grammar at compile time (a pass over
 * the whole vocabulary each), and its own reading of `maxLength` N is a chain of N nested optional
 * characters, one rule per string: a schema with a few strings of maxLength 255 took many seconds.
 * Here a string's content, then its closing quote, is spelled by rules every bounded string of the
 * schema shares:
 *
 *     at_most_j ::= "\"" | C at_most_{j-1}          (at most j characters, then the quote)
 *     exactly_n ::= C exactly_{n-1}                 (n characters, then at most 127, then the quote)
 *
 * so the schema's bounded strings cost at most 127 + 256 positions together, plus, per distinct
 * bound past 383, XGrammar's counted repetition `C{128,n}` (about 128 positions, whatever n).
 * Each rule ends with the string's closing quote, so no token's fate depends on what follows a
 * rule other than the string's own end. A character is one code point, as JSON Schema counts
 * them. A string with only minLength takes escapes (`\n`, `\"`, `\u00e9`) as characters; a `\u`
 * escape of half a surrogate pair is not generated (two escapes would count two characters where
 * JSON Schema counts their pair as one, letting a string under minLength through).
 *
 * Debt: a string with maxLength takes no escapes (each escape-capable link of a chain costs the
 * compile about four plain ones), so a valid text with a newline in it is masked out there.
 */

/** Marks, as a const string, where a bounded string's rule goes (followed by its index). */
export const STRING_SLOT = "ortserve-string-";

/** A bounded string's length range (max Infinity: none) and whether `null` is allowed beside it. */
export interface StringSlot {
  min: number;
  max: number;
  nullable: boolean;
}

/** Chains are 127 long: XGrammar writes a counted repetition below 128 as that many rules. */
const CHAIN = 127;
/**
 * The longest exactly chain: bounds up to 383 characters (255 and 256 are common) share it;
 * past that, a counted repetition per bound costs less than a longer chain.
 */
const EXACTLY = 256;
/** A character a JSON string holds unescaped, as an EBNF class. */
const CHAR = '[^\\0-\\x1f\\"\\\\]';
const HEX = "[0-9a-fA-F]";
/** What follows a backslash: an escape's code; a \u escape of a code unit outside D800-DFFF. */
const ESCAPE = "ortserve_string_escape";
const ESCAPE_RULE = `${ESCAPE} ::= [\\"\\\\/bfnrt] | "u" ([0-9a-cA-CefEF] ${HEX} ${HEX} ${HEX} | [dD] [0-7] ${HEX} ${HEX})`;
/** One character, unescaped or escaped. */
const ANY_CHAR = `(${CHAR} | "\\\\" ${ESCAPE})`;
/**
 * A string of at most this minLength spells its first characters one by one, escapes allowed;
 * past it they are unescaped (an escape-capable link costs the compile about four plain ones).
 */
const ESCAPED_HEAD = 4;
const QUOTE = '"\\""';
/** Any number of characters, then the quote. */
const ANY = "ortserve_string_any";
/**
 * Keywords that say more about a string than its type and length, or hold subschemas a $ref may
 * point into: beside them the schema keeps its own form. Others assert nothing on a string
 * (annotations, unknown keywords, keywords of other types).
 */
const KEEP = new Set([
  "enum",
  "const",
  "pattern",
  "format",
  "anyOf",
  "allOf",
  "oneOf",
  "not",
  "if",
  "then",
  "else",
  "$ref",
  "$dynamicRef",
  "$recursiveRef",
  "$defs",
  "definitions",
  "contentSchema",
  "properties",
  "patternProperties",
  "additionalProperties",
  "dependentSchemas",
  "items",
  "prefixItems",
]);

/**
 * The slot of a schema that is a string with maxLength and nothing else asserted on it (null
 * allowed beside it), or undefined.
 */
export function stringSlot(o: Record<string, unknown>): StringSlot | undefined {
  const types = Array.isArray(o.type) ? o.type : [o.type];
  if (!types.includes("string") || !types.every((t) => t === "string" || t === "null")) return undefined;
  if (Object.keys(o).some((k) => KEEP.has(k))) return undefined;
  if (o.minLength === undefined && o.maxLength === undefined) return undefined;
  const min = o.minLength ?? 0;
  const max = o.maxLength ?? Number.POSITIVE_INFINITY;
  if (!Number.isInteger(min) || !(Number.isInteger(max) || max === Number.POSITIVE_INFINITY))
    return undefined;
  if ((min as number) > (max as number)) return undefined;
  return { min: min as number, max: max as number, nullable: types.includes("null") };
}

export const stringRuleName = (i: number) => `ortserve_string_${i}`;
const atMost = (j: number) => `ortserve_string_at_most_${j}`;
const exactly = (n: number) => (n === 0 ? atMost(CHAIN) : `ortserve_string_exactly_${n}`);

/**
 * The rules of the slots (slot i entered by stringRuleName(i); none for an undefined one) and
 * the chains they use.
 */
export function stringRules(slots: readonly (StringSlot | undefined)[]): string[] {
  let atMostTop = -1;
  let exactlyTop = 0;
  let any = false;
  const rules = slots.flatMap((s, i) => {
    if (!s) return [];
    let head = s.min > 0 ? `${CHAR}{${s.min}} ` : "";
    const range = s.max - s.min;
    let rest: string;
    if (range === Number.POSITIVE_INFINITY) {
      if (s.min <= ESCAPED_HEAD) head = `${ANY_CHAR} `.repeat(s.min);
      rest = ANY;
      any = true;
    } else if (range <= CHAIN) {
      rest = atMost(range);
      atMostTop = Math.max(atMostTop, range);
    } else if (range - CHAIN <= EXACTLY) {
      // [0, 127], [128, 255], ... and [range - 127, range]: every length up to range.
      atMostTop = CHAIN;
      const starts: number[] = [];
      for (let n = CHAIN + 1; n < range - CHAIN; n += CHAIN + 1) starts.push(n);
      starts.push(range - CHAIN);
      exactlyTop = Math.max(exactlyTop, range - CHAIN);
      rest = `(${[atMost(CHAIN), ...starts.map(exactly)].join(" | ")})`;
    } else {
      // [0, 127] or [128, range]: XGrammar's counted repetition, its lookahead exact.
      atMostTop = CHAIN;
      rest = `(${atMost(CHAIN)} | ${CHAR}{128,${range - CHAIN}} ${atMost(CHAIN)})`;
    }
    const string = `${QUOTE} ${head}${rest}`;
    return `${stringRuleName(i)} ::= ${s.nullable ? `(${string}) | "null"` : string}`;
  });
  for (let j = 0; j <= atMostTop; j++)
    rules.push(`${atMost(j)} ::= ${QUOTE}${j > 0 ? ` | ${CHAR} ${atMost(j - 1)}` : ""}`);
  for (let n = 1; n <= exactlyTop; n++) rules.push(`${exactly(n)} ::= ${CHAR} ${exactly(n - 1)}`);
  if (any) rules.push(`${ANY} ::= ${QUOTE} | ${CHAR} ${ANY} | "\\\\" ${ESCAPE} ${ANY}`, ESCAPE_RULE);
  return rules;
}

/**
 * XGrammar's grammar with each slot's marker const replaced by the slot's rule, and the rules
 * added. A slot whose marker is not in the grammar (a definition nothing references) adds nothing.
 */
export function spliceStrings(ebnf: string, slots: readonly StringSlot[]): string {
  if (slots.length === 0) return ebnf;
  let out = ebnf;
  const used = slots.map((s, i) => {
    const literal = `"\\"${STRING_SLOT}${i}\\""`;
    if (!out.includes(literal)) return undefined;
    out = out.replaceAll(literal, stringRuleName(i));
    return s;
  });
  // A marker left anywhere else (inside a longer literal) would be generated as text: refuse.
  if (out.includes(STRING_SLOT)) throw new Error("a bounded string the grammar does not keep apart");
  const rules = stringRules(used);
  return rules.length === 0 ? out : `${out}\n${rules.join("\n")}`;
}
