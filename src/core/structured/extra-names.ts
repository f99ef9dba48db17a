/**
 * Extra property names kept apart from the declared ones. XGrammar reads an open object's extra
 * property as any string key with the extra-properties schema, so a declared name could come again
 * with a value its own schema forbids (`{"a": "x"}` under `a: integer`). Here each open object's
 * extra key is a rule of its own that spells no declared name: the schema marks the object's
 * extra-properties value with a const (`${EXTRA_SLOT}<i>`, schema-support.ts backendJsonSchema),
 * and spliceExtraNames finds that value's rule in XGrammar's grammar, drops the marker from it and
 * puts the key rule in place of the generic string before it. Anything not in the expected shape
 * throws, so the schema is refused rather than enforced loosely.
 */

/** Marks, as a const string, an open object's extra-properties value (followed by its index). */
export const EXTRA_SLOT = "ortserve-extra-";

/**
 * Extra names carry no escape sequences (a narrowing), so only declared names of plain printable
 * characters could be spelled by one; the others need no excluding.
 */
const PLAIN = /^[\x20-\x21\x23-\x5b\x5d-\x7e]*$/;

/** The rest of an extra key once it left the declared names, and the rules that leave them. */
const KEY_REST = "ortserve_key_rest";
const LEAVE = "ortserve_key_leave_";

/** The grammar with each shared rule (listed once per object that uses it) defined once. */
export function withSharedRules(ebnf: string): string {
  const seen = new Set<string>();
  return ebnf
    .split("\n")
    .filter((line) => {
      if (!line.startsWith(KEY_REST) && !line.startsWith(LEAVE)) return true;
      if (seen.has(line)) return false;
      seen.add(line);
      return true;
    })
    .join("\n");
}

const hex = (c: string) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`;

interface Node {
  end: boolean;
  next: Map<string, Node>;
}

/**
 * EBNF rules, entered by `name`, for a JSON string key (quotes included, no escapes) that is none
 * of `declared`: a trie of the declared names where leaving the trie, or ending the key where no
 * declared name ends, is allowed.
 */
export function extraNameRules(name: string, declared: readonly string[]): string[] {
  const root: Node = { end: false, next: new Map() };
  for (const d of declared) {
    if (!PLAIN.test(d)) continue;
    let n = root;
    for (const c of d) {
      let k = n.next.get(c);
      if (!k) {
        k = { end: false, next: new Map() };
        n.next.set(c, k);
      }
      n = k;
    }
    n.end = true;
  }
  const char = (but: string) => `[^\\"\\\\\\0-\\x1f${but}]`;
  const rules = [`${name} ::= "\\"" ${name}_0`, `${KEY_REST} ::= "\\"" | ${char("")} ${KEY_REST}`];
  // Leaving the trie is a rule per set of characters left out, shared by every node (of every
  // object) with that set: XGrammar passes over the whole vocabulary for each position where any
  // character may come, while the characters that stay in the trie each start only a few tokens.
  // The same rule may be listed by several objects (withSharedRules keeps one).
  const leaveRule = (chars: string[]): string => {
    const codes = chars.map((c) => c.charCodeAt(0)).sort((a, b) => a - b);
    const rule = `${LEAVE}${codes.map((c) => c.toString(16)).join("_")}`;
    rules.push(`${rule} ::= ${char(codes.map((c) => hex(String.fromCharCode(c))).join(""))} ${KEY_REST}`);
    return rule;
  };
  let count = 0;
  const visit = (n: Node, id: number): void => {
    const alts: string[] = n.end ? [] : ['"\\""'];
    for (const [c, k] of n.next) {
      const kid = ++count;
      alts.push(`"${hex(c)}" ${name}_${kid}`);
      visit(k, kid);
    }
    alts.push(leaveRule([...n.next.keys()]));
    rules.push(`${name}_${id} ::= ${alts.join(" | ")}`);
  };
  visit(root, 0);
  return rules;
}

export function extraNameRuleName(i: number): string {
  return `ortserve_extra_name_${i}`;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

export function spliceError(why: string): Error {
  return new Error(`a schema part the grammar does not keep apart (${why})`);
}

/**
 * The grammar with the marker const `text` taken out of the anyOf it was put in (schema-support.ts
 * backendPatterns): XGrammar writes `C ::= (("\"text\""))` and `R ::= ((C) | ...rest)`; C is
 * dropped and R keeps the rest, R's name returned. Undefined when the marker is not in the grammar
 * (a definition nothing references); throws when it is there in another shape.
 */
export function unmark(ebnf: string, text: string): { ebnf: string; rule: string } | undefined {
  const marker = `"\\"${text}\\""`;
  if (!ebnf.includes(marker)) return undefined;
  const lines = ebnf.split("\n");
  const caseRe = new RegExp(`^([\\w.-]+) ::= \\(\\(${escapeRe(marker)}\\)\\)$`);
  const caseLines = lines.filter((l) => caseRe.test(l));
  if (caseLines.length !== 1 || lines.filter((l) => l.includes(marker)).length !== 1)
    throw spliceError(`the marker ${text}`);
  const caseRule = caseRe.exec(caseLines[0]!)![1]!;
  const ruleRe = new RegExp(`^([\\w.-]+) ::= \\(\\(${escapeRe(caseRule)}\\) \\| (.*)$`);
  const ruleLines = lines.filter((l) => ruleRe.test(l));
  if (ruleLines.length !== 1) throw spliceError(`the rule of ${text}`);
  const rule = ruleRe.exec(ruleLines[0]!)![1]!;
  const out = lines
    .filter((l) => l !== caseLines[0])
    .map((l) => (l === ruleLines[0] ? l.replace(ruleRe, "$1 ::= ($2") : l))
    .join("\n");
  if (new RegExp(`(^|[^\\w.-])${escapeRe(caseRule)}($|[^\\w.-])`).test(out))
    throw spliceError(`the rule of ${text} used elsewhere`);
  return { ebnf: out, rule };
}

/** How often the rule is named in the grammar (its definition included). */
export function ruleUses(ebnf: string, rule: string): number {
  return ebnf.match(new RegExp(`(?<![\\w.-])${escapeRe(rule)}(?![\\w.-])`, "g"))?.length ?? 0;
}

/**
 * XGrammar's grammar (EBNF text) with slot i's extra key spelling none of `declared`. A slot whose
 * marker is not in the grammar (an object in a definition nothing references) leaves it as it is.
 */
export function spliceExtraNames(ebnf: string, i: number, declared: readonly string[]): string {
  const found = unmark(ebnf, `${EXTRA_SLOT}${i}`);
  if (!found) return ebnf;
  const { rule } = found;
  // `basic_string [sep] ":" [sep] value`: the extra key, the only place the value rule is used.
  const keyRule = extraNameRuleName(i);
  const pairRe = new RegExp(
    `\\bbasic_string((?: \\[ \\\\n\\\\t\\]\\S*)? ":"(?: \\[ \\\\n\\\\t\\]\\S*)? )${escapeRe(rule)}(?=[ )])`,
    "g",
  );
  let pairs = 0;
  const text = found.ebnf.replace(pairRe, (_m, sep: string) => {
    pairs++;
    return `${keyRule}${sep}${rule}`;
  });
  if (pairs === 0 || ruleUses(text, rule) !== pairs + 1) throw spliceError("the key before the extra value");
  return `${text}\n${extraNameRules(keyRule, declared).join("\n")}`;
}
