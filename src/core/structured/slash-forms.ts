/**
 * Both spellings of "/" in a grammar's fixed JSON text. XGrammar writes a const, an enum value or
 * a property name through a serializer that escapes every solidus, so `{"const": "a/b"}` becomes
 * the literal `"a\/b"` and the plain `"a/b"` (what JSON.stringify and every model write) is masked
 * out. JSON gives "/" and "\/" one meaning, so each escaped solidus in a literal is widened to an
 * alternative of the two; nothing else in the grammar changes.
 *
 * Debt: a schema inside a structural tag (a tool call's arguments) is compiled by XGrammar from its
 * JSON, never printed, so its fixed "/" keeps the escaped spelling only (narrower, not looser).
 */

/** One character of a literal as written in the EBNF (`raw`) and the character it stands for. */
interface LiteralChar {
  raw: string;
  char: string;
}

const SIMPLE_ESCAPES: Record<string, string> = { n: "\n", r: "\r", t: "\t", "0": "\0" };

/** The literal starting at `ebnf[start]` (a quote): its characters and the index after it. */
function readLiteral(ebnf: string, start: number): { chars: LiteralChar[]; end: number } {
  const chars: LiteralChar[] = [];
  let i = start + 1;
  while (i < ebnf.length && ebnf[i] !== '"') {
    if (ebnf[i] !== "\\") {
      chars.push({ raw: ebnf[i]!, char: ebnf[i]! });
      i++;
      continue;
    }
    const code = ebnf[i + 1]!;
    const width = code === "x" ? 4 : code === "u" ? 6 : code === "U" ? 10 : 2;
    const raw = ebnf.slice(i, i + width);
    const char =
      width > 2 ? String.fromCodePoint(Number.parseInt(raw.slice(2), 16)) : (SIMPLE_ESCAPES[code] ?? code);
    chars.push({ raw, char });
    i += width;
  }
  if (i >= ebnf.length) throw new Error("an unterminated literal in the grammar");
  return { chars, end: i + 1 };
}

/** A literal rewritten with each JSON-escaped solidus as `("/" | "\\/")`, or undefined if it has none. */
function widened(chars: LiteralChar[]): string | undefined {
  const parts: string[] = [];
  let run = "";
  let found = false;
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c.char !== "\\") {
      run += c.raw;
      continue;
    }
    // A backslash in the JSON text opens an escape: the next character is its code.
    const next = chars[i + 1];
    if (next?.char === "/") {
      if (run) parts.push(`"${run}"`);
      parts.push('("/" | "\\\\/")');
      run = "";
      found = true;
    } else {
      run += c.raw + (next?.raw ?? "");
    }
    i++;
  }
  if (!found) return undefined;
  if (run) parts.push(`"${run}"`);
  return `(${parts.join(" ")})`;
}

/** Whether the grammar's text may hold an escaped solidus (a backslash, escaped, before "/"). */
export function hasEscapedSlash(ebnf: string): boolean {
  return ebnf.includes("\\\\/");
}

/** The grammar with every escaped solidus in its literals also taken plain. */
export function withBothSlashForms(ebnf: string): string {
  if (!hasEscapedSlash(ebnf)) return ebnf;
  let out = "";
  let i = 0;
  while (i < ebnf.length) {
    const c = ebnf[i]!;
    if (c === "[") {
      // A character class: copied as it is (a quote inside it is not a literal).
      let j = i + 1;
      while (j < ebnf.length && ebnf[j] !== "]") j += ebnf[j] === "\\" ? 2 : 1;
      out += ebnf.slice(i, j + 1);
      i = j + 1;
    } else if (c === '"') {
      const { chars, end } = readLiteral(ebnf, i);
      out += widened(chars) ?? ebnf.slice(i, end);
      i = end;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}
