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
