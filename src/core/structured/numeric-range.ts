/**
 * Numeric bounds as exact grammars over JSON's number syntax (XGrammar's own range rules let
 * values just outside through: minimum 2 admits 1, maximum 120 admits 129). An integer range is
 * its integers written digit class by digit class; a number range is narrowed to the numbers
 * without exponent whose integer part keeps every fraction inside the bounds.
 */

export interface Bounds {
  /** Smallest integer allowed (undefined: unbounded). */
  lo?: bigint;
  /** Largest integer allowed (undefined: unbounded). */
  hi?: bigint;
  /** ceil of the lower bound and floor of the upper one, exclusive or not (for fractions). */
  ceilLo?: bigint;
  floorHi?: bigint;
}

/**
 * The integer bounds inside a schema's minimum/maximum/exclusive* (2019+ numbers or draft-4
 * booleans), or a reason they cannot be read.
 */
export function integerBounds(s: Record<string, unknown>): Bounds | { refused: string } {
  const num = (k: string) => {
    const v = s[k];
    return typeof v === "number" && Number.isFinite(v) ? v : undefined;
  };
  for (const k of ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"])
    if (k in s && num(k) === undefined && typeof s[k] !== "boolean")
      return { refused: `${k} that is not a finite number` };
  const lows: bigint[] = [];
  const highs: bigint[] = [];
  const min = num("minimum");
  const max = num("maximum");
  const exMin = num("exclusiveMinimum");
  const exMax = num("exclusiveMaximum");
  if (min !== undefined)
    lows.push(s.exclusiveMinimum === true ? BigInt(Math.floor(min)) + 1n : BigInt(Math.ceil(min)));
  if (max !== undefined)
    highs.push(s.exclusiveMaximum === true ? BigInt(Math.ceil(max)) - 1n : BigInt(Math.floor(max)));
  if (exMin !== undefined) lows.push(BigInt(Math.floor(exMin)) + 1n);
  if (exMax !== undefined) highs.push(BigInt(Math.ceil(exMax)) - 1n);
  const lo = lows.length > 0 ? lows.reduce(larger) : undefined;
  const hi = highs.length > 0 ? highs.reduce(smaller) : undefined;
  const reals = (ks: string[]) => ks.map(num).filter((v): v is number => v !== undefined);
  const realLo = reals(["minimum", "exclusiveMinimum"]);
  const realHi = reals(["maximum", "exclusiveMaximum"]);
  const ceilLo = realLo.length > 0 ? BigInt(Math.ceil(Math.max(...realLo))) : undefined;
  const floorHi = realHi.length > 0 ? BigInt(Math.floor(Math.min(...realHi))) : undefined;
  if (lo !== undefined && hi !== undefined && lo > hi)
    return { refused: "a numeric range with no integer in it" };
  return { lo, hi, ceilLo, floorHi };
}

// Math.max and Math.min do not take bigints.
function larger(a: bigint, b: bigint): bigint {
  return b > a ? b : a;
}
function smaller(a: bigint, b: bigint): bigint {
  return b < a ? b : a;
}

/**
 * A set of digit strings being read: those from `a` to `b` (equal lengths, what is left of them),
 * then any further digits when `more`; `frac` marks the integer parts that take a fraction
 * rather than end the number.
 */
interface Item {
  a: string;
  b: string;
  more: boolean;
  frac: boolean;
}

/** Items for the non-negative integers in [from, to] (to undefined: unbounded), no leading zeros. */
function items(from: bigint, to: bigint | undefined, frac: boolean): Item[] {
  if (to !== undefined && from > to) return [];
  const out: Item[] = [];
  const len = (n: bigint) => n.toString().length;
  const last = to === undefined ? len(from) : len(to);
  for (let l = len(from); l <= last; l++) {
    const low = l === 1 ? 0n : 10n ** BigInt(l - 1);
    const high = 10n ** BigInt(l) - 1n;
    const a = from > low ? from : low;
    const b = to !== undefined && to < high ? to : high;
    if (a <= b) out.push({ a: a.toString(), b: b.toString(), more: false, frac });
  }
  // Unbounded: every integer with more digits than the last length.
  if (to === undefined) out.push({ a: `1${"0".repeat(last)}`, b: "9".repeat(last + 1), more: true, frac });
  return out;
}

function step(it: Item, d: number): Item | undefined {
  if (it.a.length === 0) return it.more ? it : undefined;
  const a0 = Number(it.a[0]);
  const b0 = Number(it.b[0]);
  if (d < a0 || d > b0) return undefined;
  const n = it.a.length - 1;
  return {
    a: d === a0 ? it.a.slice(1) : "0".repeat(n),
    b: d === b0 ? it.b.slice(1) : "9".repeat(n),
    more: it.more,
    frac: it.frac,
  };
}

const keyOf = (state: Item[]) =>
  [...new Set(state.map((i) => `${i.a}/${i.b}/${i.more ? 1 : 0}/${i.frac ? 1 : 0}`))].sort().join(",");

/**
 * Rules for a deterministic grammar of the digit strings (and fractions) the items describe,
 * entered by `name`: each rule's alternatives start with distinct characters, so the backend never
 * weighs two readings of the same digits (alternatives that overlap, such as "9" [0-9] beside
 * [1-9] [0-9] [0-9], make XGrammar's matcher accept strings of any length).
 */
function digitRules(name: string, start: Item[], extra: string[] = []): string[] {
  const names = new Map<string, string>();
  const rules: string[] = [];
  const visit = (state: Item[], rule: string): string => {
    const key = keyOf(state);
    const known = names.get(key);
    if (known) return known;
    names.set(key, rule);
    const alts: string[] = [];
    if (state.some((i) => i.a.length === 0 && !i.frac)) alts.push('""');
    if (state.some((i) => i.a.length === 0 && i.frac)) alts.push(`"." [0-9]+`);
    const next = Array.from({ length: 10 }, (_, d) =>
      state.map((i) => step(i, d)).filter((i): i is Item => i !== undefined),
    );
    const index = rules.length;
    rules.push("");
    for (let d = 0; d < 10; ) {
      let e = d;
      const k = keyOf(next[d]!);
      while (e + 1 < 10 && keyOf(next[e + 1]!) === k) e++;
      if (next[d]!.length > 0)
        alts.push(`${d === e ? `"${d}"` : `[${d}-${e}]`} ${visit(next[d]!, `${name}_${names.size}`)}`);
      d = e + 1;
    }
    rules[index] = `${rule} ::= ${[...alts, ...(rule === name ? extra : [])].join(" | ")}`;
    return rule;
  };
  visit(start, name);
  return rules;
}

/**
 * EBNF rules, entered by `name`, for exactly the JSON integers in the bounds ("-0" is not
 * generated), or with `number`, for the numbers without exponent: the integers in range and I.fraction (or -I.fraction)
 * wherever every fraction after I is inside.
 */
export function rangeRules(name: string, b: Bounds, number: boolean, orNull = false): string[] {
  const { lo, hi } = b;
  const positive: Item[] = [];
  const negative: Item[] = [];
  // Integers: non-negative ones, then magnitudes [max(1, -hi), -lo] after "-".
  if (hi === undefined || hi >= 0n) positive.push(...items(lo !== undefined && lo > 0n ? lo : 0n, hi, false));
  if (lo === undefined || lo < 0n)
    negative.push(
      ...items(hi !== undefined && hi < 0n ? -hi : 1n, lo === undefined ? undefined : -lo, false),
    );
  if (number) {
    // I.F lies in [I, I + 1): inside when I >= lo (an integer value) and I + 1 <= hi.
    const floorHi = b.floorHi ?? hi;
    positive.push(
      ...items(lo !== undefined && lo > 0n ? lo : 0n, floorHi === undefined ? undefined : floorHi - 1n, true),
    );
    // -I.F lies in (-(I + 1), -I]: inside when -I <= hi (an integer value) and -(I + 1) >= lo.
    const ceilLo = b.ceilLo ?? lo;
    negative.push(
      ...items(hi !== undefined && hi < 0n ? -hi : 0n, ceilLo === undefined ? undefined : -ceilLo - 1n, true),
    );
  }
  const neg = negative.length > 0 ? digitRules(`${name}_neg`, negative) : [];
  const pos = digitRules(name, positive, [
    ...(neg.length > 0 ? [`"-" ${name}_neg`] : []),
    ...(orNull ? ['"null"'] : []),
  ]);
  return [...pos, ...neg];
}
