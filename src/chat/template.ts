/**
 * Compiling and running chat templates with @huggingface/jinja. The globals are set up here rather
 * than by Template.render so that `raise_exception` can be told apart from other failures (it is
 * the template rejecting the conversation, so the client is told about its messages) and so that
 * template variables may shadow globals, as Jinja's render kwargs do.
 */
import { Environment, Interpreter, Template } from "@huggingface/jinja";
import { invalidRequest } from "../errors.ts";
import { detectContentFormat } from "./content-format.ts";
import type { ContentFormat } from "./conversation.ts";
import { strftime } from "./strftime.ts";

export interface CompiledTemplate {
  template: Template;
  contentFormat: ContentFormat;
}

/** Thrown by the template's own `raise_exception(...)`. */
class TemplateRaised extends Error {}

// Request-supplied templates are compiled too, so the cache is bounded.
const CACHE_LIMIT = 32;
const cache = new Map<string, CompiledTemplate>();

// A template can ask for range(10**9); refuse before allocating it.
const RANGE_LIMIT = 1_000_000;

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function compileTemplate(source: string): CompiledTemplate {
  const hit = cache.get(source);
  if (hit) return hit;
  let template: Template;
  try {
    template = new Template(source);
  } catch (err) {
    throw invalidRequest(`The chat template could not be parsed: ${message(err)}`, "chat_template");
  }
  const compiled = { template, contentFormat: detectContentFormat(template.parsed) };
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
  cache.set(source, compiled);
  return compiled;
}

function range(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new Error("range() arg 3 must not be zero");
  if (Math.ceil((to - from) / step) > RANGE_LIMIT)
    throw new Error(`range() longer than ${RANGE_LIMIT} items`);
  const out: number[] = [];
  for (let i = from; step > 0 ? i < to : i > to; i += step) out.push(i);
  return out;
}

function globals(): Environment {
  const env = new Environment();
  for (const [name, value] of [
    ["true", true],
    ["false", false],
    ["none", null],
    ["True", true],
    ["False", false],
    ["None", null],
  ] as const) {
    env.set(name, value);
  }
  env.set("range", range);
  env.set("raise_exception", (msg: unknown) => {
    throw new TemplateRaised(String(msg));
  });
  env.set("strftime_now", (format: unknown) => strftime(new Date(), String(format)));
  return env;
}

/** Renders with `context` as the template variables; any failure is a 400, never a 500. */
export function renderTemplate(
  compiled: CompiledTemplate,
  context: Readonly<Record<string, unknown>>,
): string {
  try {
    const scope = new Environment(globals());
    for (const [name, value] of Object.entries(context)) {
      scope.variables.delete(name); // every scope predefines `namespace`
      scope.set(name, value);
    }
    const result = new Interpreter(scope).run(compiled.template.parsed);
    return String(result.value);
  } catch (err) {
    if (err instanceof TemplateRaised) throw invalidRequest(err.message, "messages");
    throw invalidRequest(`The chat template failed to render: ${message(err)}`, "chat_template");
  }
}
