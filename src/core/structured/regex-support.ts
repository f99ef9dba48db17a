/**
 * The regular-expression features the grammar backend enforces, checked before anything is
 * compiled: literals and escapes, character classes, `.`, groups, alternation and greedy
 * quantifiers, with `^` only at the start and `$` only at the end. Everything else — lookarounds,
 * backreferences, named groups, word boundaries, lazy quantifiers, Unicode property escapes,
 * inline flags — is refused by name, because the backend would silently not enforce it.
 * The feature list was verified by driving the backend with matching and non-matching strings
 * (test/structured/regex-support.test.ts).
 */

const CLASS_ESCAPES = new Set(["d", "D", "w", "W", "s", "S"]);
const CONTROL_ESCAPES = new Set(["t", "n", "r", "f", "v"]);
const SYNTAX = new Set([..."^$\\.*+?()[]{}|/-"]);

/** The first feature of `pattern` the backend does not enforce, or undefined when all are enforced. */
export function unsupportedRegexFeature(pattern: string): string | undefined {
  try {
    new RegExp(pattern, "u");
  } catch (err) {
    return `invalid regular expression (${(err as Error).message})`;
  }
  let i = 0;
  let depth = 0;
  const n = pattern.length;
  // Which atoms were just read, so a quantifier knows it has something to repeat.
  let quantifiable = false;
  while (i < n) {
    const c = pattern[i]!;
    if (c === "\\") {
      const problem = readEscape(pattern, i, false);
      if (typeof problem === "string") return problem;
      i = problem;
      quantifiable = true;
    } else if (c === "[") {
      const problem = charClass(pattern, i);
      if (typeof problem === "string") return problem;
      i = problem;
      quantifiable = true;
    } else if (c === "(") {
      if (pattern[i + 1] === "?") {
        if (pattern[i + 2] !== ":") {
          const kind = pattern.slice(i, i + 4);
          if (kind.startsWith("(?=") || kind.startsWith("(?!")) return "lookahead (?= / (?!";
          if (kind.startsWith("(?<=") || kind.startsWith("(?<!")) return "lookbehind (?<= / (?<!";
          if (kind.startsWith("(?<")) return "named group (?<name>";
          return `group modifier ${pattern.slice(i, i + 3)}`;
        }
        i += 3;
      } else i += 1;
      depth++;
      quantifiable = false;
    } else if (c === ")") {
      depth--;
      i++;
      quantifiable = true;
    } else if (c === "*" || c === "+" || c === "?" || c === "{") {
      if (!quantifiable) return `quantifier ${c} with nothing to repeat`;
      if (c === "{") {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(i));
        if (!m) return "a literal { (escape it as \\{)";
        i += m[0].length;
      } else i++;
      if (pattern[i] === "?") return "lazy quantifier (*?, +?, ??, {m,n}?)";
      if (pattern[i] === "+") return "possessive quantifier";
      quantifiable = false;
    } else if (c === "^") {
      if (i !== 0) return "^ anywhere but at the start";
      i++;
    } else if (c === "$") {
      if (i !== n - 1 || depth !== 0) return "$ anywhere but at the end";
      i++;
    } else {
      i++;
      quantifiable = true;
    }
  }
  return undefined;
}

/** Reads the escape at `i`; returns the index after it, or the refused feature. */
function readEscape(p: string, i: number, inClass: boolean): number | string {
  const e = p[i + 1];
  if (e === undefined) return "a trailing backslash";
  if (CLASS_ESCAPES.has(e) || CONTROL_ESCAPES.has(e) || SYNTAX.has(e)) return i + 2;
  if (e === "u") {
    if (/^[0-9a-fA-F]{4}$/.test(p.slice(i + 2, i + 6))) return i + 6;
    return "\\u{...} escapes (write \\uXXXX)";
  }
  if (e === "x" && /^[0-9a-fA-F]{2}$/.test(p.slice(i + 2, i + 4))) return i + 4;
  if (/[1-9]/.test(e)) return "backreference \\1-\\9";
  if (e === "k") return "named backreference \\k<name>";
  if (e === "b" || e === "B") return inClass ? "\\b inside a class" : "word boundary \\b / \\B";
  if (e === "p" || e === "P") return "Unicode property escape \\p{...}";
  if (e === "0") return "\\0";
  if (e === "c") return "control escape \\cX";
  // Other escaped punctuation stands for itself.
  if (/[^A-Za-z0-9]/.test(e)) return i + 2;
  return `escape \\${e}`;
}

function charClass(p: string, start: number): number | string {
  let i = start + 1;
  if (p[i] === "^") i++;
  if (p[i] === "]") return "an empty class []";
  while (i < p.length && p[i] !== "]") {
    if (p[i] === "\\") {
      const r = readEscape(p, i, true);
      if (typeof r === "string") return r;
      i = r;
    } else if (p[i] === "[") {
      return "[ inside a class (escape it as \\[)";
    } else i++;
  }
  return i + 1;
}

/**
 * The pattern as the backend must read it to keep ECMAScript's meaning: `.` outside a class does
 * not match line terminators in ECMAScript, but matches everything in the backend (measured).
 */
export function forBackend(pattern: string): string {
  let out = "";
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "\\") {
      out += c + (pattern[i + 1] ?? "");
      i++;
    } else if (inClass) {
      if (c === "]") inClass = false;
      out += c;
    } else if (c === "[") {
      inClass = true;
      out += c;
      // A leading ] or ^] belongs to the class.
    } else out += c === "." ? "[^\\n\\r\\u2028\\u2029]" : c;
  }
  return out;
}

const PRINTABLE_ASCII = Array.from({ length: 0x7f - 0x20 }, (_, i) => 0x20 + i);
const DIGITS = new Set(Array.from("0123456789", (c) => c.charCodeAt(0)));
const WORD = new Set(
  Array.from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_", (c) => c.charCodeAt(0)),
);

/**
 * A positive class of the printable ASCII characters outside `excluded`, never a quote or a
 * backslash. Wildcards are given to the backend in this form: it clamps negated classes to ASCII
 * (it warns so) and matches a pattern against the raw JSON text, so `[^x]` there could let a
 * quote end the string or a non-ASCII space through where ECMAScript's class would not.
 */
function asciiClass(excluded: (cp: number) => boolean): string {
  const keep = PRINTABLE_ASCII.filter((cp) => cp !== 0x22 && cp !== 0x5c && !excluded(cp));
  return `[${keep.map((cp) => `\\x${cp.toString(16).padStart(2, "0")}`).join("")}]`;
}

function codePointOfEscape(p: string, i: number): { cp: number; next: number } | undefined {
  const e = p[i + 1]!;
  if (e === "x") return { cp: Number.parseInt(p.slice(i + 2, i + 4), 16), next: i + 4 };
  if (e === "u") return { cp: Number.parseInt(p.slice(i + 2, i + 6), 16), next: i + 6 };
  const control: Record<string, number> = { t: 9, n: 10, r: 13, f: 12, v: 11 };
  if (e in control) return { cp: control[e]!, next: i + 2 };
  if (/[^A-Za-z0-9]/.test(e)) return { cp: e.codePointAt(0)!, next: i + 2 };
  return undefined;
}

const unsafeInJson = (cp: number) => cp < 0x20 || cp === 0x22 || cp === 0x5c;
const UNSAFE = "a character a JSON string must escape (quote, backslash, control)";

/**
 * A JSON Schema `pattern` as the backend must read it so that every string it allows is one JSON
 * holds unescaped and that ECMAScript's pattern matches: `.`, negated classes, \S, \W and \D become
 * classes of printable ASCII without quote and backslash (asciiClass); \s is a plain space. A
 * pattern that itself needs a quote, a backslash or a control character is refused. Call after
 * unsupportedRegexFeature passed.
 */
export function forJsonString(pattern: string): { pattern: string } | { refused: string } {
  let out = "";
  const p = pattern;
  for (let i = 0; i < p.length; ) {
    const c = p[i]!;
    if (c === "\\") {
      const e = p[i + 1]!;
      const shorthand: Record<string, string> = {
        s: " ",
        S: asciiClass((cp) => cp === 0x20),
        W: asciiClass((cp) => WORD.has(cp)),
        D: asciiClass((cp) => DIGITS.has(cp)),
        d: "\\d",
        w: "\\w",
      };
      if (e in shorthand) {
        out += shorthand[e];
        i += 2;
        continue;
      }
      const esc = codePointOfEscape(p, i);
      if (!esc) return { refused: `escape \\${e}` };
      if (unsafeInJson(esc.cp)) return { refused: UNSAFE };
      out += p.slice(i, esc.next);
      i = esc.next;
    } else if (c === "[") {
      const r = jsonClass(p, i);
      if ("refused" in r) return r;
      out += r.text;
      i = r.next;
    } else if (c === ".") {
      out += asciiClass(() => false);
      i++;
    } else if (c === '"') return { refused: UNSAFE };
    else {
      out += c;
      i++;
    }
  }
  return { pattern: out };
}

/** One class item: a code point, or a shorthand's members (within printable ASCII). */
type Item = { cp: number; next: number } | { set: (cp: number) => boolean; next: number };

function classItem(p: string, i: number): Item | string {
  if (p[i] !== "\\") {
    const cp = p.codePointAt(i)!;
    return { cp, next: i + String.fromCodePoint(cp).length };
  }
  const e = p[i + 1]!;
  if (e === "d") return { set: (cp) => DIGITS.has(cp), next: i + 2 };
  if (e === "w") return { set: (cp) => WORD.has(cp), next: i + 2 };
  if (e === "s") return { set: (cp) => cp === 0x20, next: i + 2 };
  if (e === "S" || e === "W" || e === "D") return `\\${e} inside a class`;
  return codePointOfEscape(p, i) ?? `escape \\${e}`;
}

function jsonClass(p: string, start: number): { text: string; next: number } | { refused: string } {
  let i = start + 1;
  const negated = p[i] === "^";
  if (negated) i++;
  // Members within printable ASCII (what a negated class leaves out), and the positive class's text.
  const members: ((cp: number) => boolean)[] = [];
  let body = "";
  while (p[i] !== "]") {
    const item = classItem(p, i);
    if (typeof item === "string") return { refused: item };
    if ("set" in item) {
      members.push(item.set);
      const text = p.slice(i, item.next);
      body += text === "\\s" ? " " : text;
      i = item.next;
      continue;
    }
    const lo = item.cp;
    let hi = item.cp;
    let next = item.next;
    if (p[next] === "-" && p[next + 1] !== "]") {
      const end = classItem(p, next + 1);
      if (typeof end === "string") return { refused: end };
      if ("set" in end) return { refused: "a class range ending in a shorthand" };
      hi = end.cp;
      next = end.next;
    }
    members.push((cp) => cp >= lo && cp <= hi);
    if (!negated && (lo < 0x20 || (lo <= 0x22 && hi >= 0x22) || (lo <= 0x5c && hi >= 0x5c)))
      return { refused: UNSAFE };
    body += p.slice(i, next);
    i = next;
  }
  const text = negated ? asciiClass((cp) => members.some((m) => m(cp))) : `[${body}]`;
  return { text, next: i + 1 };
}

/** Any character a JSON string holds unescaped, printable ASCII (what `.` becomes in forJsonString). */
const ANY_RUN = `${asciiClass(() => false)}*`;

/** `pattern`'s top-level alternatives (split at `|` outside groups and classes). */
function topLevelBranches(pattern: string): string[] {
  const branches: string[] = [];
  let depth = 0;
  let inClass = false;
  let start = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "\\") i++;
    else if (inClass) inClass = c !== "]";
    else if (c === "[") inClass = true;
    else if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "|" && depth === 0) {
      branches.push(pattern.slice(start, i));
      start = i + 1;
    }
  }
  branches.push(pattern.slice(start));
  return branches;
}

/**
 * A JSON Schema `pattern` (in forJsonString's form) as a whole-string pattern: JSON Schema's
 * `pattern` searches (`"^dag"` holds for "dag_1", `"[0-9]{3}"` for "a123b"), the backend matches
 * the whole string. Each top-level alternative without `^` may be preceded, and without `$`
 * followed, by any run of printable ASCII (a narrowing of "any characters": escapes and non-ASCII
 * text around the match are not generated). `^` and `$` sit only at the pattern's ends
 * (unsupportedRegexFeature), so they anchor the first and last alternatives only, as in ECMAScript.
 */
export function searchForm(pattern: string): string {
  const branches = topLevelBranches(pattern);
  const whole = branches.map((b) => {
    const anchoredStart = b.startsWith("^");
    const anchoredEnd = b.endsWith("$") && !/(^|[^\\])(\\\\)*\\\$$/.test(b);
    const core = b.slice(anchoredStart ? 1 : 0, anchoredEnd ? -1 : undefined);
    return `${anchoredStart ? "" : ANY_RUN}${core === "" ? "" : `(?:${core})`}${anchoredEnd ? "" : ANY_RUN}`;
  });
  // One group around the alternatives: the backend writes a string's pattern between its quotes
  // as it is, so `x|y` there read as `"x` or `y"` (measured: both accepted as whole outputs).
  return whole.length === 1 ? whole[0]! : `(?:${whole.map((b) => `(?:${b})`).join("|")})`;
}
