/**
 * Numeric bounds as exact grammars over JSON's number syntax (XGrammar's own range rules let
 * values just outside through: minimum 2 admits 1, maximum 120 admits 129). An integer range is
 * its integers written digit class by digit class; a number range is narrowed to the numbers
 * without exponent: its integers, I.fraction wherever every fraction after I is inside, and at an
 * edge that falls inside an integer part, the fractions on the inner side (fraction-edges.ts).
 */
import {
  fractionDigits,
  fractionRules,
  inclusive,
  nonzeroFractionRules,
  type RealBound,
} from "./fraction-edges.ts";

export interface Bounds {
  /** Smallest integer allowed (undefined: unbounded). */
  lo?: bigint;
  /** Largest integer allowed (undefined: unbounded). */
  hi?: bigint;
  /** The tightest lower and upper bounds as numbers, exclusive or not (for fractions). */
  low?: RealBound;
  high?: RealBound;
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
  // The tightest real bound of each side; at equal values the exclusive one.
  const tightest = (bounds: RealBound[], lower: boolean): RealBound | undefined =>
    bounds.reduce<RealBound | undefined>((t, b) => {
      if (!t) return b;
      if (b.value === t.value) return b.exclusive ? b : t;
      return (lower ? b.value > t.value : b.value < t.value) ? b : t;
    }, undefined);
  const low = tightest(
    [
      ...(min !== undefined ? [{ value: min, exclusive: s.exclusiveMinimum === true }] : []),
      ...(exMin !== undefined ? [{ value: exMin, exclusive: true }] : []),
    ],
    true,
  );
  const high = tightest(
    [
      ...(max !== undefined ? [{ value: max, exclusive: s.exclusiveMaximum === true }] : []),
      ...(exMax !== undefined ? [{ value: exMax, exclusive: true }] : []),
    ],
    false,
  );
  if (lo !== undefined && hi !== undefined && lo > hi)
    return { refused: "a numeric range with no integer in it" };
  return { lo, hi, low, high };
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
 * then any further digits when `more`; `frac`, for integer parts that take a fraction rather than
 * end the number, is what follows the point (EBNF).
 */
interface Item {
  a: string;
  b: string;
  more: boolean;
  frac?: string;
}

/** Items for the non-negative integers in [from, to] (to undefined: unbounded), no leading zeros. */
function items(from: bigint, to: bigint | undefined, frac?: string): Item[] {
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
  [...new Set(state.map((i) => `${i.a}/${i.b}/${i.more ? 1 : 0}/${i.frac ?? ""}`))].sort().join(",");

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
    if (state.some((i) => i.a.length === 0 && i.frac === undefined)) alts.push('""');
    // The integer parts' ranges are disjoint, so one fraction at most follows the digits read.
    const fracs = new Set(state.flatMap((i) => (i.a.length === 0 && i.frac !== undefined ? [i.frac] : [])));
    if (fracs.size > 1) throw new Error("two fractions after the same integer part");
    for (const f of fracs) alts.push(`"." ${f}`);
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

/** Any fraction: every one is inside. */
const ANY_FRACTION = "[0-9]+";

/**
 * The integer parts that take a fraction, for magnitudes M (digits without sign) with
 * lower <= M <= upper (each bound exclusive or not): every I whose [I, I + 1) lies inside, and
 * the integer part each bound falls inside with the fractions on its inner side.
 */
function fractionItems(name: string, lower: RealBound | undefined, upper: RealBound | undefined) {
  const rules: string[] = [];
  const out: Item[] = [];
  if (upper && upper.value === 0 && upper.exclusive) return { items: out, rules };
  const lo = lower ? inclusive(lower, true) : 0;
  const up = upper ? inclusive(upper, false) : undefined;
  if (up !== undefined && up < lo) return { items: out, rules };
  const first = BigInt(Math.ceil(lo));
  const last = up === undefined ? undefined : BigInt(Math.floor(up)) - 1n;
  out.push(...items(first, last, ANY_FRACTION));
  // A bound inside an integer part I: I's fractions on the inner side, unless the other bound
  // falls inside I too (that part is left out: a narrowing).
  const edge = (i: bigint, rule: string, ruleText: string[] | undefined) => {
    if (!ruleText) return;
    rules.push(...ruleText);
    out.push(...items(i, i, rule));
  };
  if (lower?.value === 0 && lower.exclusive) {
    // Above 0: a nonzero digit soon enough that the double is not 0.
    if (up === undefined || up >= 1) edge(0n, `${name}_above`, nonzeroFractionRules(`${name}_above`));
  } else if (!Number.isInteger(lo) && (up === undefined || Math.floor(lo) + 1 <= up))
    edge(
      BigInt(Math.floor(lo)),
      `${name}_above`,
      fractionRules(`${name}_above`, fractionDigits(lo), "atLeast"),
    );
  if (up !== undefined && !Number.isInteger(up) && Math.floor(up) >= Math.ceil(lo))
    edge(
      BigInt(Math.floor(up)),
      `${name}_below`,
      fractionRules(`${name}_below`, fractionDigits(up), "atMost"),
    );
  return { items: out, rules };
}

/**
 * EBNF rules, entered by `name`, for exactly the JSON integers in the bounds ("-0" is not
 * generated), or with `number`, for the numbers without exponent: the integers in range and
 * I.fraction (or -I.fraction) where the fraction keeps it inside (fractionItems).
 */
export function rangeRules(name: string, b: Bounds, number: boolean, orNull = false): string[] {
  const { lo, hi, low, high } = b;
  const positive: Item[] = [];
  const negative: Item[] = [];
  // Integers: non-negative ones, then magnitudes [max(1, -hi), -lo] after "-".
  if (hi === undefined || hi >= 0n) positive.push(...items(lo !== undefined && lo > 0n ? lo : 0n, hi));
  if (lo === undefined || lo < 0n)
    negative.push(...items(hi !== undefined && hi < 0n ? -hi : 1n, lo === undefined ? undefined : -lo));
  const fractionRulesOf: string[] = [];
  if (number) {
    // Non-negative I.F: magnitudes from the lower bound where it is above 0, up to the upper one.
    if (!high || high.value > 0 || (high.value === 0 && !high.exclusive)) {
      const lower = low && (low.value > 0 || (low.value === 0 && low.exclusive)) ? low : undefined;
      const p = fractionItems(`${name}_frac`, lower, high);
      positive.push(...p.items);
      fractionRulesOf.push(...p.rules);
    }
    // -I.F: its magnitude at least -high (where high is below 0) and at most -low.
    if (!low || low.value <= 0) {
      const lower =
        high && (high.value < 0 || (high.value === 0 && high.exclusive))
          ? { value: -high.value || 0, exclusive: high.exclusive }
          : undefined;
      const upper = low && { value: -low.value || 0, exclusive: low.exclusive };
      const n = fractionItems(`${name}_neg_frac`, lower, upper);
      negative.push(...n.items);
      fractionRulesOf.push(...n.rules);
    }
  }
  const neg = negative.length > 0 ? digitRules(`${name}_neg`, negative) : [];
  const pos = digitRules(name, positive, [
    ...(neg.length > 0 ? [`"-" ${name}_neg`] : []),
    ...(orNull ? ['"null"'] : []),
  ]);
  return [...pos, ...neg, ...fractionRulesOf];
}
