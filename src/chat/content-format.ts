/**
 * Decides whether a template wants message content as one string or as a list of parts, by
 * looking for a loop over a message's `content` in the parsed template — the same AST test as
 * vLLM's _detect_content_format: find the names bound to `messages` (directly or via `set x =
 * messages[1:]` and the like), the loop variables iterating them, then a `for` over `<that>.content`.
 */
import type { ContentFormat } from "./conversation.ts";

/** The AST classes are not exported by @huggingface/jinja, so nodes are read structurally. */
interface Node {
  type: string;
  [key: string]: unknown;
}

function isNode(value: unknown): value is Node {
  return (
    typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string"
  );
}

function* nodesIn(value: unknown): Generator<Node> {
  if (isNode(value)) {
    yield value;
    for (const [key, child] of Object.entries(value)) {
      // Operators are lexer tokens, some typed "Identifier" (and, or, in); they are not variables.
      if (key !== "operator") yield* nodesIn(child);
    }
  } else if (Array.isArray(value)) {
    for (const item of value) yield* nodesIn(item);
  } else if (value instanceof Map) {
    for (const [k, v] of value) {
      yield* nodesIn(k);
      yield* nodesIn(v);
    }
  }
}

function isVar(node: unknown, name: string): boolean {
  return isNode(node) && node.type === "Identifier" && node.value === name;
}

/** `name.key` or `name['key']`. */
function isAttr(node: Node, name: string, key: string): boolean {
  if (node.type !== "MemberExpression" || !isVar(node.object, name) || !isNode(node.property)) return false;
  const prop = node.property;
  return node.computed
    ? prop.type === "StringLiteral" && prop.value === key
    : prop.type === "Identifier" && prop.value === key;
}

/** The variable (or its `key` attribute), possibly filtered, tested, sliced or `if`-selected. */
function accesses(node: unknown, name: string, key?: string): boolean {
  if (!isNode(node)) return false;
  switch (node.type) {
    case "FilterExpression":
    case "TestExpression":
      return accesses(node.operand, name, key);
    case "SelectExpression":
      return accesses(node.lhs, name, key);
    case "MemberExpression":
      if (node.computed && isNode(node.property) && node.property.type === "SliceExpression") {
        return accesses(node.object, name, key);
      }
  }
  return key === undefined ? isVar(node, name) : isAttr(node, name, key);
}

function loopVar(loop: Node): string | undefined {
  const target = loop.loopvar;
  return isNode(target) && target.type === "Identifier" ? String(target.value) : undefined;
}

/** Loop variables of `for` loops over any of `names` (or over their `key` attribute). */
function loopVarsOver(all: readonly Node[], names: ReadonlySet<string>, key?: string): Set<string> {
  const vars = new Set<string>();
  for (const node of all) {
    if (node.type !== "For") continue;
    const target = loopVar(node);
    if (target !== undefined && [...names].some((name) => accesses(node.iterable, name, key)))
      vars.add(target);
  }
  return vars;
}

/** `messages` plus every name assigned from it, transitively. */
function messagesAliases(all: readonly Node[]): Set<string> {
  const names = new Set(["messages"]);
  const queue = ["messages"];
  for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
    for (const node of all) {
      if (node.type !== "Set" || !isNode(node.assignee) || node.assignee.type !== "Identifier") continue;
      const target = String(node.assignee.value);
      if (!names.has(target) && accesses(node.value, name)) {
        names.add(target);
        queue.push(target);
      }
    }
  }
  return names;
}

export function detectContentFormat(program: unknown): ContentFormat {
  const all = [...nodesIn(program)];
  const messageVars = loopVarsOver(all, messagesAliases(all));
  return loopVarsOver(all, messageVars, "content").size > 0 ? "openai" : "string";
}
