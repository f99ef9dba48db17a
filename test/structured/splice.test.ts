/**
 * The splicing of ortserve's rules into XGrammar's grammar fails closed: a marker missing is an
 * unreferenced definition (nothing to do), a marker in any shape other than the one expected is an
 * error (the schema is then refused), never a grammar that silently keeps the marker's text.
 */
import { describe, expect, it } from "vitest";
import { spliceExtraNames, unmark } from "../../src/core/structured/extra-names.ts";
import { spliceAnyOrder } from "../../src/core/structured/object-order.ts";

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
});
