/**
 * The splicing of ortserve's rules into XGrammar's grammar fails closed: a marker missing is an
 * unreferenced definition (nothing to do), a marker in any shape other than the one expected is an
 * error (the schema is then refused), never a grammar that silently keeps the marker's text.
 */
import { describe, expect, it } from "vitest";
import {
  extraNameRules,
  spliceExtraNames,
  unmark,
  withSharedRules,
} from "../../src/core/structured/extra-names.ts";
import { spliceAnyOrder } from "../../src/core/structured/object-order.ts";
import { withBothSlashForms } from "../../src/core/structured/slash-forms.ts";
import { spliceStrings } from "../../src/core/structured/string-length.ts";

const GRAMMAR = [
  'root_addl_case_0 ::= (("\\"ortserve-extra-0\\""))',
  "root_addl ::= ((root_addl_case_0) | (basic_integer))",
  'root ::= (("{" "\\"a\\"" ":" basic_integer root_1 "}"))',
  'root_1 ::= ("" | ("," basic_string ":" root_addl root_1))',
].join("\n");

describe("splicing rules into XGrammar's grammar", () => {
  it("takes a marker out of its anyOf", () => {
    const r = unmark(GRAMMAR, "ortserve-extra-0");
    expect(r?.rule).toBe("root_addl");
    expect(r?.ebnf).toContain("root_addl ::= ((basic_integer))");
    expect(r?.ebnf).not.toContain("ortserve-extra-0");
    expect(unmark(GRAMMAR, "ortserve-extra-1")).toBeUndefined();
  });

  it("puts the extra-name rule before the extra value", () => {
    const out = spliceExtraNames(GRAMMAR, 0, ["a"]);
    expect(out).toContain('"," ortserve_extra_name_0 ":" root_addl root_1');
    expect(out).not.toMatch(/basic_string ":" root_addl/);
    expect(out).toMatch(/^ortserve_extra_name_0_0 ::= /m);
  });

  it("refuses a marker in any other shape", () => {
    const twice = `${GRAMMAR}\nother ::= (("\\"ortserve-extra-0\\""))`;
    expect(() => unmark(twice, "ortserve-extra-0")).toThrow(/does not keep apart/);
    const inlined = GRAMMAR.replace("root_addl ::= ((root_addl_case_0) | (basic_integer))", "");
    expect(() => unmark(inlined, "ortserve-extra-0")).toThrow(/does not keep apart/);
    const usedElsewhere = `${GRAMMAR}\nx ::= ((root_addl))`;
    expect(() => spliceExtraNames(usedElsewhere, 0, ["a"])).toThrow(/does not keep apart/);
    const object = [
      'root_case_0 ::= (("\\"ortserve-object-0\\""))',
      "root ::= ((root_case_0) | (root_case_1))",
      'root_case_1 ::= (("{" "}"))',
    ].join("\n");
    // The object's marker without its properties' markers.
    expect(() => spliceAnyOrder(object, 0, { names: ["a", "b"], required: [], open: false }, true)).toThrow(
      /does not keep apart/,
    );
  });

  it("bounded strings: one rule per slot, the length chains shared, a marker elsewhere refused", () => {
    const grammar = [
      'root ::= (("{" "\\"a\\"" ":" root_a "," "\\"b\\"" ":" root_b "}"))',
      'root_a ::= (("\\"ortserve-string-0\\""))',
      'root_b ::= (("\\"ortserve-string-1\\""))',
      'unused ::= (("\\"ortserve-string-2\\""))',
    ].join("\n");
    const slots = [
      { min: 0, max: 5, nullable: false },
      { min: 1, max: 300, nullable: true },
      { min: 0, max: 9, nullable: false },
    ];
    const out = spliceStrings(grammar, slots);
    expect(out).toContain("root_a ::= ((ortserve_string_0))");
    expect(out).toMatch(/^ortserve_string_1 ::= \(.*\) \| "null"$/m);
    // The third slot's marker sits in a rule nothing uses: still replaced, its rule still there.
    expect(out).not.toContain("ortserve-string-");
    // One chain of at-most rules for every slot (127 long: the longest a slot needs).
    expect(out.match(/^ortserve_string_at_most_\d+ ::= /gm)).toHaveLength(128);
    const absent = spliceStrings(grammar.replace("ortserve-string-2", "x"), slots);
    expect(absent).not.toMatch(/^ortserve_string_2 ::= /m);
    const inside = 'root ::= (("\\"key\\":\\"ortserve-string-0\\""))';
    expect(() => spliceStrings(inside, slots)).toThrow(/does not keep apart/);
  });

  it("extra-name tries share the rules that leave them, each defined once", () => {
    const rules = [...extraNameRules("k0", ["ab", "ac"]), ...extraNameRules("k1", ["xb"])];
    const text = withSharedRules(rules.join("\n"));
    const defined = text.split("\n").map((l) => l.split(" ::= ")[0]!);
    expect(new Set(defined).size).toBe(defined.length);
    // After "a" (k0) both b and c stay in the trie; after "x" (k1) only b; after a whole name
    // (k0's "ab", "ac", k1's "xb") nothing does: one rule for those three nodes.
    expect(text).toMatch(/^ortserve_key_leave_62_63 ::= \[\^.*\\x62\\x63\] ortserve_key_rest$/m);
    expect(text).toMatch(/^ortserve_key_leave_62 ::= /m);
    expect(rules.filter((l) => l.startsWith("ortserve_key_leave_ ::= "))).toHaveLength(3);
    expect(text.split("\n").filter((l) => l.startsWith("ortserve_key_leave_ ::= "))).toHaveLength(1);
  });
});

describe("both spellings of a fixed solidus", () => {
  it("widens only an escaped solidus in a literal, never an escaped backslash or a class", () => {
    // JSON text "a\\\/b": an escaped backslash, then an escaped solidus; the class holds a quote.
    const ebnf = 'root ::= (("\\"a\\\\\\\\\\\\/b\\"") | ([^\\"\\\\/] "\\\\/"))';
    expect(withBothSlashForms(ebnf)).toBe(
      'root ::= ((("\\"a\\\\\\\\" ("/" | "\\\\/") "b\\"")) | ([^\\"\\\\/] (("/" | "\\\\/"))))',
    );
  });

  it("leaves a grammar with no escaped solidus as it is", () => {
    const ebnf = 'root ::= (("\\"a/b\\"") | ("\\"a\\\\\\\\b\\""))';
    expect(withBothSlashForms(ebnf)).toBe(ebnf);
  });
});
