/**
 * The fractions of a number range's edge: for the integer part a non-integer bound falls in, the
 * digits after the point that keep the number inside (`minimum: 1.5` takes 1.5 and 1.75, not
 * 1.25). A digit string F is compared with the bound's digits f as decimals (F "5" > f "25"), one
 * digit at a time, so each rule's alternatives start with distinct characters, as numeric-range.ts
 * needs.
 *
 * Instances are compared as doubles (JSON.parse, then the validator), and rounding is monotonic:
 * a decimal at least the bound's shortest spelling parses to at least the bound. An exclusive bound
 * is read as inclusive at the next double inward, so a decimal that rounds onto the bound itself is
 * never generated.
 */

/** A bound of a range of magnitudes (numbers without sign). */
export interface RealBound {
  value: number;
  exclusive: boolean;
}

/** Fraction digits longer than this are not spelled out (the edge is then left out: a narrowing). */
const MAX_DIGITS = 40;
/** `exclusiveMinimum: 0`'s edge: a nonzero digit within this many places (1e-31 is still above 0). */
const ZERO_RUN = 30;

const bits = new DataView(new ArrayBuffer(8));
/** The next double after a non-negative x, toward +Infinity (up) or toward 0 (down, x > 0). */
function nextDouble(x: number, up: boolean): number {
  bits.setFloat64(0, x);
  bits.setBigUint64(0, bits.getBigUint64(0) + (up ? 1n : -1n));
  return bits.getFloat64(0);
}

/** The bound as the smallest (lower) or largest (upper) magnitude inside it. */
export function inclusive(b: RealBound, lower: boolean): number {
  return b.exclusive ? nextDouble(b.value, lower) : b.value;
}

/** The digits after the point of x's shortest decimal spelling (x >= 0), trailing zeros dropped. */
export function fractionDigits(x: number): string {
  const [mantissa, exp] = x.toExponential().split("e") as [string, string];
  const digits = mantissa.replace(".", "");
  const point = Number(exp) + 1; // digits before the point
  const frac = point >= digits.length ? "" : point >= 0 ? digits.slice(point) : "0".repeat(-point) + digits;
  return frac.replace(/0+$/, "");
}

/**
 * EBNF rules, entered by `name`, for the digit strings F (one or more) after the point with F at
 * least `f` (`atLeast`) or at most `f` (`atMost`), as decimals; undefined when f is too long to
 * spell out. f has no trailing zeros and is not empty.
 */
export function fractionRules(name: string, f: string, kind: "atLeast" | "atMost"): string[] | undefined {
  if (f.length === 0 || f.length > MAX_DIGITS) return undefined;
  const rule = (i: number) => (i === 0 ? name : `${name}_${i}`);
  const rules: string[] = [];
  for (let i = 0; i < f.length; i++) {
    const d = Number(f[i]);
    const alts: string[] = [];
    // At most f: F may end once it has a digit and agrees with f so far (f goes on, so F < f).
    if (kind === "atMost" && i > 0) alts.push('""');
    if (kind === "atMost" && d > 0) alts.push(`${d === 1 ? '"0"' : `[0-${d - 1}]`} [0-9]*`);
    alts.push(`"${d}" ${rule(i + 1)}`);
    if (kind === "atLeast" && d < 9) alts.push(`${d === 8 ? '"9"' : `[${d + 1}-9]`} [0-9]*`);
    rules.push(`${rule(i)} ::= ${alts.join(" | ")}`);
  }
  // F agreed with all of f: at least f takes any digits more; at most f only zeros.
  rules.push(`${rule(f.length)} ::= ${kind === "atLeast" ? "[0-9]*" : '"0"*'}`);
  return rules;
}

/** Rules for F with a nonzero digit within ZERO_RUN places: the fractions of `exclusiveMinimum: 0`. */
export function nonzeroFractionRules(name: string): string[] {
  const rules: string[] = [];
  for (let i = 0; i < ZERO_RUN; i++)
    rules.push(
      `${i === 0 ? name : `${name}_${i}`} ::= [1-9] [0-9]*${i + 1 < ZERO_RUN ? ` | "0" ${name}_${i + 1}` : ""}`,
    );
  return rules;
}
